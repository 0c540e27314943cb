# Fits the float erf used by src/ops/functors.h (fast_erf): x P(x^2)/Q(x^2) on [0, 4],
# minimising relative error by reweighted linear least squares (Loeb). Needs python3-mpmath.
import mpmath as mp
mp.mp.dps = 40
NP, NQ = 7, 5   # P: p0..p6 in t=x^2, Q: q0=1, q1..q4
X = [mp.mpf(4)*(1-mp.cos(mp.pi*(k+0.5)/600))/2 for k in range(600)]  # chebyshev-ish nodes in [0,4]
X = [x for x in X if x > 0]
w = [mp.mpf(1)]*len(X)
for it in range(8):
    A=[]; b=[]
    for x,wi in zip(X,w):
        t=x*x; e=mp.erf(x)
        s = 1/(e) # relative error weighting
        row=[x*t**i*wi*s for i in range(NP)] + [-e*t**j*wi*s for j in range(1,NQ)]
        A.append(row); b.append(e*wi*s)
    sol = mp.qr_solve(mp.matrix(A), mp.matrix(b))[0]
    p=[sol[i] for i in range(NP)]; q=[mp.mpf(1)]+[sol[NP+j] for j in range(NQ-1)]
    w=[1/abs(sum(q[j]*(x*x)**j for j in range(NQ))) for x in X]
    err=max(abs((x*sum(p[i]*(x*x)**i for i in range(NP))/sum(q[j]*(x*x)**j for j in range(NQ)))/mp.erf(x)-1) for x in [mp.mpf(k)/1000*4 for k in range(1,1001)])
    print(it, mp.nstr(err,5))
print("P", [mp.nstr(v,17) for v in p]); print("Q", [mp.nstr(v,17) for v in q])
