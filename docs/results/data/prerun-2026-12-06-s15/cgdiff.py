"""Exclusive callgrind Ir by C function, file B less file A (callgrind_annotate): usage: python cgdiff.py A.out B.out [N]"""
import subprocess, sys
def load(p):
    out = subprocess.run(['callgrind_annotate','--threshold=100',p],capture_output=True,text=True).stdout
    d={}
    for l in out.splitlines():
        l=l.strip()
        if not l or not l[0].isdigit(): continue
        parts=l.split(None,1)
        try: ir=int(parts[0].replace(',',''))
        except: continue
        name=parts[1]
        if name.startswith('('): name=name.split(')',1)[1]
        name=name.strip().split(' [')[0].replace('python-build.20260509073455.222/Python-3.11.7/','')
        d[name]=d.get(name,0)+ir
    return d
a,b=load(sys.argv[1]),load(sys.argv[2])
diff={k:b.get(k,0)-a.get(k,0) for k in set(a)|set(b)}
n=int(sys.argv[3]) if len(sys.argv)>3 else 25
for k,v in sorted(diff.items(), key=lambda kv:-kv[1])[:n]: print(f'{v/1e6:9.1f}  {k[:100]}')
