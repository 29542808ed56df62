import sqlite3, math, sys, random
db=sys.argv[1]; dtype=sys.argv[2]; thr=int(sys.argv[3]); ov,gmac,gbs=map(float,sys.argv[4].split(','))
con=sqlite3.connect(db)
rows=con.execute("select key,macs,bytes,batch,in_c,out_c,out_h,out_w,kernel_h,stride,median_ms from measurements where kind='kernel' and op='conv' and dtype=? and threads=? order by id",(dtype,thr)).fetchall()
pref='u8in ' if dtype=='int8' else ''
rows=[r for r in rows if r[0].startswith(pref)]
def l(x): return math.log(x+1)
def waste(c): return math.ceil(c/16)*16/c-1
def feat(macs,bytes_,b,ci,co,oh,ow,k,s): return [l(macs),l(bytes_),l(b),l(ci),l(co),l(oh*ow),k,s,waste(ci),waste(co)]
def roof(macs,bytes_): return ov+max(macs/gmac/1e6, bytes_/gbs/1e6)
F=[feat(*r[1:10]) for r in rows]; R=[math.log(r[10]/roof(r[1],r[2])) for r in rows]
d=10; N=len(rows)
def stdz(idx):
    mean=[sum(F[i][j] for i in idx)/len(idx) for j in range(d)]
    sd=[max(1e-6,(sum((F[i][j]-mean[j])**2 for i in idx)/len(idx))**.5) for j in range(d)]
    return mean,sd
def knn(qf,idx,mean,sd,w,k=4):
    ds=sorted((math.sqrt(sum((w[j]*(qf[j]-F[i][j])/sd[j])**2 for j in range(d))),i) for i in idx)[:k]
    ws=[1/(x+0.05) for x,_ in ds]; return sum(wi*R[i] for wi,(x,i) in zip(ws,ds))/sum(ws)
folds=[( [i for i in range(N) if i%5!=f], [i for i in range(N) if i%5==f]) for f in range(5)]
fs=[stdz(tr) for tr,te in folds]
def err(w, med=False):
    e=[]
    for (tr,te),(mean,sd) in zip(folds,fs):
        for i in te: e.append(abs(knn(F[i],tr,mean,sd,w)-R[i]))
    if med: e.sort(); return e[len(e)//2]
    return sum(min(x,1) for x in e)/len(e)
w=[1.0]*d; best=err(w)
print("start", best, "median rel", math.exp(err(w,True))-1)
for p in range(3):
    for j in range(d):
        for f in (0.5,2):
            t=w[:]; t[j]*=f; e=err(t)
            if e<best-1e-4: best,w=e,t
    print("pass",p,[round(x,3) for x in w],best, "median rel", math.exp(err(w,True))-1)
mean,sd=stdz(range(N))
for q in sys.argv[5:]:
    b,ci,co,h,k,s=map(int,q.split(','))
    oh=(h+2*(k//2)-k)//s+1; macs=b*ci*co*k*k*oh*oh
    by=dict(f32=4,bf16=2,int8=1)[dtype]*(b*ci*h*h+b*co*oh*oh+ci*co*k*k)
    qf=feat(macs,by,b,ci,co,oh,oh,k,s)
    print(q, "w=1 %.3f  learned %.3f"%(roof(macs,by)*math.exp(knn(qf,range(N),mean,sd,[1]*d)), roof(macs,by)*math.exp(knn(qf,range(N),mean,sd,w))))
# nested: for each outer fold, tune weights by inner 4-fold CV on its training points, then score the outer test points
def tune(idx):
    inner=[([i for n,i in enumerate(idx) if n%4!=f],[i for n,i in enumerate(idx) if n%4==f]) for f in range(4)]
    ifs=[stdz(tr) for tr,te in inner]
    def e(w):
        s=[]
        for (tr,te),(m,sd) in zip(inner,ifs):
            for i in te: s.append(min(abs(knn(F[i],tr,m,sd,w)-R[i]),1))
        return sum(s)/len(s)
    w=[1.0]*d; b=e(w)
    for p in range(2):
        for j in range(d):
            for f in (0.5,2):
                t=w[:]; t[j]*=f; x=e(t)
                if x<b-1e-4: b,w=x,t
    return w
e1=[];e2=[]
for (tr,te),(mean,sd) in zip(folds,fs):
    w=tune(tr)
    for i in te:
        e1.append(abs(knn(F[i],tr,mean,sd,[1]*d)-R[i])); e2.append(abs(knn(F[i],tr,mean,sd,w)-R[i]))
e1.sort(); e2.sort()
print("nested outer median rel: w=1 %.3f tuned %.3f ; within10: %.2f %.2f"%(math.exp(e1[len(e1)//2])-1, math.exp(e2[len(e2)//2])-1, sum(x<math.log(1.1) for x in e1)/len(e1), sum(x<math.log(1.1) for x in e2)/len(e2)))
