"""Session 13 (helper i13b): one measured step's kernels under the ops a pattern names, grouped by kernel name: count,
share of the step's kernel time, predicted power at the limiter's steady ceiling, FLOP and byte rates, grid and block
(``simulator.step_breakdown.kernel_rows``, the parameters ``validate-steps`` uses). The "µs" column is the group's
time over its rows (repeats included).

    PYTHONPATH=. python validation/h200/work13/kernels.py validation/h200/steps12 poolformer-s12 'convolution_backward'
"""
import json, sys, re
from pathlib import Path
from collections import defaultdict
from kdvfs.gpus import get_gpu
from kdvfs.importers import import_kineto
from kdvfs.limiter import limiter_for
from simulator.step_breakdown import kernel_rows
d = Path(sys.argv[1]); model = sys.argv[2]; oprx = re.compile(sys.argv[3])
spec = get_gpu('h200'); lim = limiter_for(spec)
doc = json.loads((d/'steps.json').read_text())
st = next(s for s in doc['steps'] if s['model']==model)
imp = import_kineto(d/st['trace'], name=model)
tr = imp.trace
rows, f = kernel_rows(tr, spec, lim)
agg = defaultdict(lambda: [0,0.0,0.0,0.0,0.0,None,None])
for r,k in zip(rows, tr.kernels):
    if not oprx.search(r['op'] or ''): continue
    key = (r['op'], re.sub(r'\(.*','',r['name'])[:110], k.math, r['work_source'])
    a = agg[key]; a[0]+=1; a[1]+=r['time_s']; a[2]+=r['energy_j']; a[3]+=r['flops']; a[4]+=r['bytes']; a[5]=r['grid']; a[6]=k.block
tot_t = sum(r['time_s'] for r in rows)
print(model, 'ceiling', f, 'kernel time', tot_t)
for key,a in sorted(agg.items(), key=lambda x:-x[1][1]):
    print('%-28s %-110s %-8s %5d  t %6.2f%% %7.1fus  %4.0fW  %6.1f TF/s  %5.2f TB/s grid %s blk %s' % (key[0][:28], key[1], key[2], a[0], 100*a[1]/tot_t, 1e6*a[1]/a[0], a[2]/a[1], a[3]/a[1]/1e12, a[4]/a[1]/1e12, a[5], a[6]))
