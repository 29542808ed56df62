import sys,re,collections
def load(f, measured=False):
    d={}
    for l in open(f):
        p=l.split()
        if len(p)>=5 and p[1].isdigit() and p[2] in('fp32','bf16','int8'):
            k=(p[0],int(p[1]),p[2],int(p[3]))
            d[k]=(float(p[4]), float(p[5]) if measured and len(p)>5 else None)
    return d
# usage: score_predict_only.py MEASURED_EVAL.txt PREDICTIONS.txt...
meas=load(sys.argv[1],True)
for f in sys.argv[2:]:
    pr=load(f); n=0; tot=0; by=collections.Counter(); byn=collections.Counter(); errs=[]
    for k,(p,_) in pr.items():
        if k not in meas: continue
        m=meas[k][1]; e=(p-m)/m; tot+=1; errs.append(abs(e))
        g=(k[2],k[3]); byn[g]+=1
        if abs(e)<=0.10: n+=1; by[g]+=1
    errs.sort()
    print(f, f"{n}/{tot} ({100*n/tot:.0f}%) median|e| {100*errs[len(errs)//2]:.1f}%", ' '.join(f"{g[0]}t{g[1]} {by[g]}/{byn[g]}" for g in sorted(byn)))
