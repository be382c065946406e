"""Issue 12, session 12: one definition of each op's work (``kdvfs.work_ops``), the importer pricing upsampling,
pooling windows, im2col/col2im and scatter-adds from their arithmetic, and ``kdvfs.work.op_rule``."""

from __future__ import annotations

import hashlib

# sha256 (first 16 hex digits) of every entry's (name, FLOPs, bytes, dtype, tensor, source) per zoo set, computed at
# main cdb7e83, before the step-ops formulas moved to kdvfs.work_ops: the move changes no entry's work. Sets added
# later are not pinned here.
_ZOO_DIGESTS = {
    "base": "130645b1ffc586ae", "cache-gaps": "2b1440e62cc7f0be", "step-shapes": "8c367f8e47666222",
    "duty": "8ee1d920a6208dca", "top-clock": "cf3653ecdb9a23c4", "attention": "a34e6a1a58e130b8",
    "held-duty": "8702b8d745aedb4e", "small": "85eaef1f017b1d42", "thermal": "7ce449e741166c4e",
    "warm-cool": "405651701a2b9908", "conv": "dfeedc85fe025440", "anchor": "b6e98aae71d5ed34",
    "tiny-grid": "f76fc9b128e9eae8", "tiny-grid2": "a318ad5621d6170e", "step-ops": "351c199eb0a5c5d9",
}


def test_every_zoo_entry_keeps_its_work_bit_for_bit():
    from hw_backend.zoo import ZOO_SETS

    for name, digest in _ZOO_DIGESTS.items():
        h = hashlib.sha256()
        for k in ZOO_SETS[name]():
            w = k.work
            h.update(repr((k.name, w.flops.hex(), w.bytes.hex(), w.dtype, w.tensor, w.source)).encode())
        assert h.hexdigest()[:16] == digest, name
