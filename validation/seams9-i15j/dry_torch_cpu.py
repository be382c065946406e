"""The real-card path of the characterisation's window on the CPU: ``TorchZoo("cpu")`` (host timing), the counter
read in its thread (``threaded=True``), against a card stub on the wall clock that draws 400 W, whose energy counter
steps every 80 ms (the H200's) and takes 3 ms a read. Needs CPU torch. Usage, from the checkout's root:

    PYTHONPATH=. /work/venv-torch/bin/python validation/seams9-i15j/dry_torch_cpu.py
"""

import time

from hw_backend.characterize import _measure_kernel
from hw_backend.zoo import default_zoo, held_duty_zoo
from hw_backend.zoo_torch import TorchZoo

T0 = time.perf_counter()


class WallCard:
    """400 W on the wall clock; the counter shows the energy at its last 80 ms step; a read takes 3 ms."""

    name = "wall-clock stub"

    def energy_mj(self) -> int:
        time.sleep(0.003)
        t = time.perf_counter() - T0
        return int(int(t / 0.08) * 0.08 * 400 * 1000)

    def clocks_mhz(self) -> tuple[int, int]:
        return 1980, 3201

    def power_mw(self) -> int:
        return 400_000

    def temperature_c(self) -> int:
        return 40


ex = TorchZoo("cpu")
entries = ([k for k in default_zoo() if k.name == "gelu_bf16_1GiB"]
           + [k for k in held_duty_zoo() if k.name == "duty_gemm_bf16_8192_x4_gap1ms"])
for k in entries:
    r = _measure_kernel(ex, WallCard(), k, window_s=1.0, warmup_s=0.2, threaded=True)
    print(k.name, k.role, {x: r[x] for x in ("power_w", "window_s", "window_edge_s", "clock_samples")})
