"""Verbs ``gpu list|show`` and ``profile build|fit|crossval``."""

from __future__ import annotations

from kdvfs.cli.common import load_trace, out
from kdvfs.console import print_json, table

__all__ = ["register"]

def cmd_gpu_list(a) -> int:
    from kdvfs.gpus import PRESETS

    rows = [g.to_dict() for g in PRESETS.values()]
    if a.json:
        print_json(rows)
        return 0
    out(a).print(table("GPU presets", ["name", "card", "clocks", "limit (W)", "switch (ms)"],
                        [[g.name, g.full_name, g.describe_clocks(), g.power_limit_w, 1e3 * g.switch.total_s]
                         for g in PRESETS.values()]))
    return 0


def cmd_gpu_show(a) -> int:
    from kdvfs.gpus import get_gpu

    d = get_gpu(a.name).to_dict()
    if a.json:
        print_json(d)
    else:
        c = out(a)
        for k, v in d.items():
            if k != "sources":
                c.print(f"{k:>20}: {v}")
        c.print("sources:")
        for k, v in d["sources"].items():
            c.print(f"  {k}: {v}")
    return 0




def cmd_profile_build(a) -> int:
    from kdvfs.gpus import get_gpu
    from kdvfs.model import default_params
    from kdvfs.profile import build_profile, save_profile

    t, g = load_trace(a.trace), get_gpu(a.gpu)
    p = build_profile(t, g, default_params(t, g))
    save_profile(p, a.output)
    doc = {"output": str(a.output), "kernels": len(p.keys), "settings": len(p.settings), "source": "model"}
    if a.json:
        from kdvfs.profile import clock_table

        print_json(doc | {"clocks": clock_table(t, p)})
    else:
        out(a).print(f"wrote {a.output}: {len(p.keys)} kernels × {len(p.settings)} settings (model)")
    return 0


def cmd_profile_fit(a) -> int:
    from kdvfs.fit import fit_profile, read_sweep
    from kdvfs.gpus import get_gpu
    from kdvfs.profile import save_profile

    sw = read_sweep(a.sweep)
    p = fit_profile(sw, get_gpu(a.gpu), trace_name=a.trace_name or "")
    save_profile(p, a.output)
    doc = {"output": str(a.output), "kernels": len(p.keys), "settings": len(p.settings), "source": "fitted"}
    print_json(doc) if a.json else out(a).print(f"wrote {a.output}: {len(p.keys)} kernels × {len(p.settings)} settings (fitted)")
    return 0


def cmd_profile_crossval(a) -> int:
    from kdvfs.fit import crossval, read_sweep
    from kdvfs.gpus import get_gpu

    r = crossval(read_sweep(a.sweep), a.train_points, get_gpu(a.gpu) if a.gpu else None)
    if a.json:
        print_json(r)
        return 0
    c = out(a)
    c.print(table(f"cross-validation, {a.train_points} training settings per kernel ({r['card']} card)",
                  ["kernel", "test points", "time MAPE %", "power MAPE %", "energy MAPE %"],
                  [[k["kernel"], k["test"], k["time_mape_pct"], k["power_mape_pct"], k["energy_mape_pct"]] for k in r["kernels"]]))
    c.print(f"overall: time {r['time_mape_pct']:.2f} %, power {r['power_mape_pct']:.2f} %, energy {r['energy_mape_pct']:.2f} %")
    return 0


def register(sub, j) -> None:
    g = sub.add_parser("gpu", help="the GPU catalog").add_subparsers(dest="gpu_cmd", required=True)
    j(g.add_parser("list")).set_defaults(fn=cmd_gpu_list)
    sp = j(g.add_parser("show"))
    sp.add_argument("name")
    sp.set_defaults(fn=cmd_gpu_show)

    pr = sub.add_parser("profile", help="build, fit and cross-validate profiles").add_subparsers(dest="profile_cmd", required=True)
    sp = j(pr.add_parser("build", help="a profile from the model"))
    sp.add_argument("--trace", required=True)
    sp.add_argument("--gpu", required=True)
    sp.add_argument("-o", "--output", required=True)
    sp.set_defaults(fn=cmd_profile_build)
    sp = j(pr.add_parser("fit", help="fit the model to a measured sweep and complete the grid"))
    sp.add_argument("sweep")
    sp.add_argument("--gpu", required=True)
    sp.add_argument("--trace-name")
    sp.add_argument("-o", "--output", required=True)
    sp.set_defaults(fn=cmd_profile_fit)
    sp = j(pr.add_parser("crossval", help="fit on K settings per kernel, predict the rest"))
    sp.add_argument("sweep")
    sp.add_argument("--train-points", type=int, default=3)
    sp.add_argument("--gpu", help="a catalog card (default: a card built from the sweep)")
    sp.set_defaults(fn=cmd_profile_crossval)
