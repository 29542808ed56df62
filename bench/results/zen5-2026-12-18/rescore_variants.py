#!/usr/bin/python3
# Dev-only, session 18: rescoring three kiln_perfmodel_eval --canary runs with the prediction scaled by the canaries
# read before each case, four ways. The predict_only_split_*.txt files are --predict-only runs of a one-off patch that
# printed, after each prediction, the part priced by conv/gemm/matmul steps (not kept: an extra column would read as a
# measurement to perfmodel_rescore.py). Run from this directory.
import re,sys
def load(evalf,predf):
    split={}
    for l in open(predf):
        f=l.split()
        if len(f)==6 and f[1].isdigit(): split[(f[0],f[1],f[2],f[3])]=(float(f[4]),float(f[5]))
    passes=[]
    for l in open(evalf):
        if not passes or re.match(r'pass \d+ of \d+',l): passes.append([])
        if l.startswith('repeatability'): break
        m=re.match(r'(\S+)\s+(\d+)\s+(fp32|bf16|int8)\s+(\d)\s+([\d.]+)\s+([\d.]+)\s+[+-]',l)
        if not m: continue
        k=(m[1],m[2],m[3],m[4]); c=re.search(r'canary x([\d.]+)',l); mm=re.search(r'mem x([\d.]+)',l); u=re.search(r'uncalibrated ([\d.]+)',l)
        pred=float(u[1]) if u else float(m[5])
        passes[-1].append((k,pred,float(m[6]),float(c[1]) if c else 1.0,float(mm[1]) if mm else None))
    return split,[p for p in passes if p]
def score(split,passes,f):
    byk={}
    for p in passes:
        for x in p: byk.setdefault(x[0],[]).append(x)
    per=[sum(abs(f(split,x)/x[2]-1)<=.1 for x in p) for p in passes]
    lo=0
    for k,xs in byk.items():
        l=min(xs,key=lambda x:x[2]); lo+=abs(f(split,l)/l[2]-1)<=.1
    return per,lo
def t1mem(s,x):
    tot,comp=s[x[0]]; sc=x[1]/tot
    if x[0][3]=='1' and x[4]: return sc*(comp*x[3]+(tot-comp)*x[4])
    return x[1]*x[3]
def t1mem_clamp(s,x):
    tot,comp=s[x[0]]; sc=x[1]/tot
    if x[0][3]=='1' and x[4]: return sc*(comp*x[3]+(tot-comp)*min(1.3,max(0.7,x[4])))
    return x[1]*x[3]
# 'both' variants: conv/gemm steps x compute canary, the other steps x the memory (Add/Concat) canary
def both(s,x):
    tot,comp=s[x[0]]; sc=x[1]/tot
    return sc*(comp*x[3]+(tot-comp)*(x[4] or x[3]))
variants={'both':both,'raw':lambda s,x:x[1],'all*C':lambda s,x:x[1]*x[3],'t1 mem*M':t1mem,'t1 mem*clampM':t1mem_clamp}
R='../'
for ev,pr in [(R+'zen5-2026-12-17/perfmodel_eval_3passes_warm_pools.txt','predict_only_split_warm_pools_profile.txt'),(R+'zen5-2026-12-17/perfmodel_eval_3passes.txt','predict_only_split_session16_profile.txt'),(R+'zen5-2026-12-18/perfmodel_eval_3passes_calibrated.txt','predict_only_split_warm_pools_profile.txt')]:
    s,p=load(ev,pr); print(ev.split('/')[-1])
    for n,f in variants.items(): print('  ',n,score(s,p,f))
