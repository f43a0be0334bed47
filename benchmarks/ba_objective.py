"""Workload: ADBench's bundle adjustment Jacobian, per-observation blocks.

The formulas of ADBench's BA objective, written here from its
documentation.  A camera has 11 parameters: a Rodrigues rotation vector
``r`` (3), its centre ``C`` (3), the focal length ``f``, the principal
point ``x0`` (2) and two radial distortion coefficients ``k`` (2).  An
observation ``o`` of point ``X`` (3) by camera ``cam`` with weight ``w``
and measured feature ``feat`` (2) has the reprojection error

    Y = R(r) (X - C)                        (Rodrigues; Y = X - C + r x (X - C) at r = 0)
    q = Y[:2] / Y[2],  d = q (1 + k0 |q|^2 + k1 |q|^4)
    err = w (f d + x0 - feat)               (2 residuals)

and the weight error ``1 - w^2``.  The Jacobian is sparse: each
observation's 2 residuals depend on 15 numbers (its camera, its point and
its weight), so ADBench computes the 2 x 15 block of every observation
(here as three leaves, 2 x 11, 2 x 3 and 2 per observation) and the
weight errors' derivatives.

The instance is synthetic, seeded, with the counts of ADBench's smallest
file ba1_n49_m7834_p31843 (49 cameras, 7,834 points, 31,843 observations):
small rotations, points about 10 units in front of the cameras.  s2s_ad's
column is ``ad.jit(ad.vmap(ad.jacrev(reproj_error, argnums=(0, 1, 2))))`` on
the gathered per-observation cameras and points (and ``vmap(grad)`` of the
weight error); the hand-written Numba Jacobian is the chain rule written
out per observation (the rotation matrix, the derivative of the rotated
point with respect to ``r``, the projection and distortion), checked
against central differences of the user's function.  Target: s2s_ad no
slower than JAX's ``jit(vmap(jacrev))``.
"""
import types

import numba
import numpy as np

from . import core

NAME = "ba_objective"
SIZES = {"full": (49, 7834, 31843), "tiny": (3, 10, 30)}


# -- the user's code: one observation -----------------------------------------

def cross(a, b):
    return np.array([a[1] * b[2] - a[2] * b[1],
                     a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]])


def rodrigues_rotate(rot, X):
    sqtheta = np.dot(rot, rot)
    if sqtheta != 0.0:
        theta = np.sqrt(sqtheta)
        costheta = np.cos(theta)
        sintheta = np.sin(theta)
        w = rot / theta
        tmp = np.dot(w, X) * (1.0 - costheta)
        return X * costheta + cross(w, X) * sintheta + w * tmp
    return X + cross(rot, X)


def radial_distort(rad, proj):
    rsq = np.dot(proj, proj)
    L = 1.0 + rad[0] * rsq + rad[1] * rsq * rsq
    return proj * L


def project(cam, X):
    Xcam = rodrigues_rotate(cam[0:3], X - cam[3:6])
    distorted = radial_distort(cam[9:11], Xcam[0:2] / Xcam[2])
    return distorted * cam[6] + cam[7:9]


def reproj_error(cam, X, w, feat):
    return w * (project(cam, X) - feat)


def weight_error(w):
    return 1.0 - w * w


HELPERS = (cross, rodrigues_rotate, radial_distort, project, reproj_error, weight_error)


def ba_objective(cams, X, w, obs, feats):
    """Every residual: the user's per-observation function in a loop."""
    p = obs.shape[0]
    reproj = np.empty((p, 2))
    for i in range(p):
        reproj[i, :] = reproj_error(cams[obs[i, 0]], X[obs[i, 1]], w[i], feats[i])
    return reproj, weight_error(w)


# -- the hand-written Jacobian ------------------------------------------------------

@numba.njit(parallel=True, cache=True)
def _hand_jacobian(cams, X, w, obs, feats):
    """Per observation, the chain rule written out on scalars and 3 x 3
    scratch matrices (one set per chunk of observations, chunks in parallel):
    G = d err / d Y = w f (dd/dq) (dq/dY); the camera's rotation columns are
    G dY/dr, its centre's -G R, the point's G R, with R = dY/d(X - C)."""
    p = obs.shape[0]
    Jc = np.empty((p, 2, 11))
    JX = np.empty((p, 2, 3))
    Jw = np.empty((p, 2))
    dwe = np.empty(p)
    nchunk = min(p, 64)                      # chunks of observations, one scratch set each
    for t in numba.prange(nchunk):
        R = np.empty((3, 3))
        Dr = np.empty((3, 3))
        Y = np.empty(3)
        u = np.empty(3)
        uxY = np.empty(3)
        Yr = np.empty(3)
        du = np.empty(3)
        for o in range(t * p // nchunk, (t + 1) * p // nchunk):
            cam = cams[obs[o, 0]]
            pt = X[obs[o, 1]]
            wo = w[o]
            for a in range(3):
                Y[a] = pt[a] - cam[3 + a]
            r0, r1, r2 = cam[0], cam[1], cam[2]
            sq = r0 * r0 + r1 * r1 + r2 * r2
            if sq != 0.0:
                th = np.sqrt(sq)
                c = np.cos(th)
                s = np.sin(th)
                u[0], u[1], u[2] = r0 / th, r1 / th, r2 / th
                uY = u[0] * Y[0] + u[1] * Y[1] + u[2] * Y[2]
                uxY[0] = u[1] * Y[2] - u[2] * Y[1]
                uxY[1] = u[2] * Y[0] - u[0] * Y[2]
                uxY[2] = u[0] * Y[1] - u[1] * Y[0]
                for a in range(3):
                    Yr[a] = Y[a] * c + uxY[a] * s + u[a] * uY * (1.0 - c)
                # R = c I + s [u]x + (1 - c) u u^T
                for a in range(3):
                    for b in range(3):
                        R[a, b] = (1.0 - c) * u[a] * u[b]
                    R[a, a] += c
                R[0, 1] -= s * u[2]
                R[0, 2] += s * u[1]
                R[1, 0] += s * u[2]
                R[1, 2] -= s * u[0]
                R[2, 0] -= s * u[1]
                R[2, 1] += s * u[0]
                # dY/dr_k: dtheta = u_k, du = (e_k - u u_k) / theta
                for k in range(3):
                    dth = u[k]
                    for a in range(3):
                        du[a] = -u[a] * dth / th
                    du[k] += 1.0 / th
                    duY = du[0] * Y[0] + du[1] * Y[1] + du[2] * Y[2]
                    dx0 = du[1] * Y[2] - du[2] * Y[1]
                    dx1 = du[2] * Y[0] - du[0] * Y[2]
                    dx2 = du[0] * Y[1] - du[1] * Y[0]
                    for a in range(3):
                        dxa = dx0 if a == 0 else (dx1 if a == 1 else dx2)
                        Dr[a, k] = (-Y[a] * s * dth + dxa * s + uxY[a] * c * dth
                                    + du[a] * uY * (1.0 - c) + u[a] * duY * (1.0 - c)
                                    + u[a] * uY * s * dth)
            else:
                Yr[0] = Y[0] + r1 * Y[2] - r2 * Y[1]
                Yr[1] = Y[1] + r2 * Y[0] - r0 * Y[2]
                Yr[2] = Y[2] + r0 * Y[1] - r1 * Y[0]
                # R = I + [r]x, dY/dr = -[Y]x
                R[0, 0], R[0, 1], R[0, 2] = 1.0, -r2, r1
                R[1, 0], R[1, 1], R[1, 2] = r2, 1.0, -r0
                R[2, 0], R[2, 1], R[2, 2] = -r1, r0, 1.0
                Dr[0, 0], Dr[0, 1], Dr[0, 2] = 0.0, Y[2], -Y[1]
                Dr[1, 0], Dr[1, 1], Dr[1, 2] = -Y[2], 0.0, Y[0]
                Dr[2, 0], Dr[2, 1], Dr[2, 2] = Y[1], -Y[0], 0.0
            iz = 1.0 / Yr[2]
            q0 = Yr[0] * iz
            q1 = Yr[1] * iz
            k0, k1 = cam[9], cam[10]
            rsq = q0 * q0 + q1 * q1
            L = 1.0 + k0 * rsq + k1 * rsq * rsq
            dL = 2.0 * (k0 + 2.0 * k1 * rsq)        # dL/dq = dL * q
            f = cam[6]
            d0 = q0 * L
            d1 = q1 * L
            # A = w f dd/dq (2 x 2), then G = A dq/dY (2 x 3)
            wf = wo * f
            a00 = wf * (L + q0 * dL * q0)
            a01 = wf * (q0 * dL * q1)
            a10 = wf * (q1 * dL * q0)
            a11 = wf * (L + q1 * dL * q1)
            g00, g01, g02 = a00 * iz, a01 * iz, -(a00 * q0 + a01 * q1) * iz
            g10, g11, g12 = a10 * iz, a11 * iz, -(a10 * q0 + a11 * q1) * iz
            for b in range(3):
                Jc[o, 0, b] = g00 * Dr[0, b] + g01 * Dr[1, b] + g02 * Dr[2, b]
                Jc[o, 1, b] = g10 * Dr[0, b] + g11 * Dr[1, b] + g12 * Dr[2, b]
                gr0 = g00 * R[0, b] + g01 * R[1, b] + g02 * R[2, b]
                gr1 = g10 * R[0, b] + g11 * R[1, b] + g12 * R[2, b]
                Jc[o, 0, 3 + b] = -gr0
                Jc[o, 1, 3 + b] = -gr1
                JX[o, 0, b] = gr0
                JX[o, 1, b] = gr1
            Jc[o, 0, 6] = wo * d0
            Jc[o, 1, 6] = wo * d1
            Jc[o, 0, 7], Jc[o, 0, 8] = wo, 0.0
            Jc[o, 1, 7], Jc[o, 1, 8] = 0.0, wo
            Jc[o, 0, 9] = wf * q0 * rsq
            Jc[o, 1, 9] = wf * q1 * rsq
            Jc[o, 0, 10] = wf * q0 * rsq * rsq
            Jc[o, 1, 10] = wf * q1 * rsq * rsq
            Jw[o, 0] = f * d0 + cam[7] - feats[o, 0]
            Jw[o, 1] = f * d1 + cam[8] - feats[o, 1]
            dwe[o] = -2.0 * wo
    return Jc, JX, Jw, dwe


def oracle(args, out):
    """Central differences of the user's per-observation function, for 40
    observations (the first 20 and 20 drawn at random), all 15 inputs;
    the weight errors' derivative against -2 w."""
    cams, X, w, obs, feats = args
    Jc, JX, Jw, dwe = out
    rng = np.random.default_rng(1)
    p = obs.shape[0]
    picks = sorted(set(range(min(20, p))) | set(rng.integers(0, p, 20).tolist()))
    got, want = [], []
    for o in picks:
        flat = np.concatenate([cams[obs[o, 0]], X[obs[o, 1]], [w[o]]])
        cols = np.empty((2, 15))
        for k in range(15):
            h = 1e-6 * max(1.0, abs(flat[k]))
            hi, lo = flat.copy(), flat.copy()
            hi[k] += h
            lo[k] -= h
            fh = reproj_error(hi[:11], hi[11:14], hi[14], feats[o])
            fl = reproj_error(lo[:11], lo[11:14], lo[14], feats[o])
            cols[:, k] = (fh - fl) / (2 * h)
        want.append(cols)
        got.append(np.concatenate([Jc[o], JX[o], Jw[o][:, None]], axis=1))
    return max(core.compare(np.array(got), np.array(want)), core.compare(dwe, -2.0 * w))


# -- peers --------------------------------------------------------------------

def _gathered(cams, X, obs):
    return cams[obs[:, 0]], X[obs[:, 1]]


def jax_vmap(args):
    jax, jnp, _ = core.load_jax()

    def rodrigues_where(rot, X):
        # jax.vmap cannot branch on a traced value: both branches, then where
        sqtheta = jnp.dot(rot, rot)
        nz = sqtheta != 0.0
        theta = jnp.sqrt(jnp.where(nz, sqtheta, 1.0))
        costheta = jnp.cos(theta)
        sintheta = jnp.sin(theta)
        w = rot / theta
        tmp = jnp.dot(w, X) * (1.0 - costheta)
        far = X * costheta + jnp.cross(w, X) * sintheta + w * tmp
        return jnp.where(nz, far, X + jnp.cross(rot, X))

    reproj = core.rebind(reproj_error, (cross, radial_distort, project), np=jnp,
                         rodrigues_rotate=rodrigues_where)
    werr = core.rebind(weight_error, np=jnp)
    blocks = jax.vmap(jax.jacrev(reproj, argnums=(0, 1, 2)))
    dwerr = jax.vmap(jax.grad(werr))

    @jax.jit
    def jac(cams, X, w, obs, feats):
        J = blocks(cams[obs[:, 0]], X[obs[:, 1]], w, feats)
        return J + (dwerr(w),)

    return core.Impl("jax", lambda *a: core.jax_ready(jac(*a)),
                     tuple(jnp.asarray(a) for a in args),
                     note="jit of vmap(jacrev(reproj_error, argnums=(0, 1, 2))) and "
                          "vmap(grad(weight_error)), gather inside; the user's helpers on "
                          "jax.numpy, the rotation's branch as jnp.where")


def torch_func(args):
    torch = core.load_torch()
    from torch.func import grad, jacrev, vmap

    def rodrigues_where(rot, X):
        sqtheta = torch.dot(rot, rot)
        nz = sqtheta != 0.0
        theta = torch.sqrt(torch.where(nz, sqtheta, torch.ones_like(sqtheta)))
        costheta = torch.cos(theta)
        sintheta = torch.sin(theta)
        w = rot / theta
        tmp = torch.dot(w, X) * (1.0 - costheta)
        far = X * costheta + torch.linalg.cross(w, X) * sintheta + w * tmp
        return torch.where(nz, far, X + torch.linalg.cross(rot, X))

    tnp = types.SimpleNamespace(array=torch.stack, dot=torch.dot, sqrt=torch.sqrt,
                                cos=torch.cos, sin=torch.sin)
    reproj = core.rebind(reproj_error, (cross, radial_distort, project), np=tnp,
                         rodrigues_rotate=rodrigues_where)
    blocks = vmap(jacrev(reproj, argnums=(0, 1, 2)))
    dwerr = vmap(grad(weight_error))

    def jac(cams, X, w, obs, feats):
        return tuple(blocks(cams[obs[:, 0]], X[obs[:, 1]], w, feats)) + (dwerr(w),)

    return core.Impl("torch", jac, tuple(torch.from_numpy(a.copy()) for a in args),
                     note="torch.func vmap(jacrev) and vmap(grad), the user's helpers with "
                          "torch.stack for np.array, the rotation's branch as torch.where")


def autograd_hips(args):
    raise core.Unavailable("autograd has no vmap: a Python loop of jacobian calls over "
                           f"{args[3].shape[0]:,} observations")


def build(size="full"):
    n, m, p = SIZES[size]
    rng = np.random.default_rng(0)
    cams = np.empty((n, 11))
    cams[:, 0:3] = rng.normal(0.0, 0.1, (n, 3))                  # rotation
    cams[:, 3:5] = rng.normal(0.0, 1.0, (n, 2))                  # centre
    cams[:, 5] = rng.uniform(-11.0, -9.0, n)
    cams[:, 6] = rng.uniform(400.0, 600.0, n)                    # focal length
    cams[:, 7:9] = rng.normal(0.0, 1.0, (n, 2))                  # principal point
    cams[:, 9] = rng.normal(0.0, 0.1, n)                         # distortion
    cams[:, 10] = rng.normal(0.0, 0.01, n)
    cams[0, 0:3] = 0.0                                           # one camera at r = 0
    X = np.column_stack([rng.normal(0.0, 1.0, (m, 2)), rng.uniform(-1.0, 1.0, m)])
    w = rng.uniform(0.5, 1.5, p)
    obs = np.column_stack([rng.integers(0, n, p), rng.permutation(np.arange(p) % m)])
    obs = obs.astype(np.int64)
    feats = np.array([project(cams[obs[i, 0]], X[obs[i, 1]]) for i in range(p)])
    feats += rng.normal(0.0, 1.0, (p, 2))

    def s2s_ad_blocks(ad, jit):
        blocks = ad.vmap(ad.jacrev(reproj_error, argnums=(0, 1, 2)), in_axes=(0, 0, 0, 0))
        dwerr = ad.vmap(ad.grad(weight_error))
        if jit:
            blocks, dwerr = ad.jit(blocks), ad.jit(dwerr)

        def jac(cams, X, w, obs, feats):
            J_cam, J_X, J_w = blocks(cams[obs[:, 0]], X[obs[:, 1]], w, feats)
            return J_cam, J_X, J_w, dwerr(w)
        return jac

    return core.Workload(
        name=NAME, title="ADBench bundle adjustment, per-observation Jacobian blocks",
        size=f"n={n}, m={m:,}, p={p:,}", kind="jacobian",
        args=(cams, X, w, obs, feats), argnums=(0, 1, 2), primal=ba_objective,
        numba_primal=core.njit_program(ba_objective, *HELPERS),
        numba_note="the user's per-observation function in a loop over observations "
                   "(serial), helpers jitted too",
        hand_grad=_hand_jacobian, s2s_ad=s2s_ad_blocks, oracle=oracle,
        oracle_name="central differences of the user's function (40 observations)",
        oracle_tol=1e-6,
        labels={"hand": "hand-written Numba blocks", "s2s_ad": "s2s_ad jit(vmap(jacrev))",
                "s2s_ad_py": "s2s_ad vmap(jacrev) (NumPy)", "jax": "JAX jit(vmap(jacrev))",
                "torch": "PyTorch func vmap(jacrev)"},
        peers={"jax": jax_vmap, "torch": torch_func, "autograd": autograd_hips},
        slow_peers=("s2s_ad_py",),
        targets=[core.Target("s2s_ad", "jax", 1.0)])
