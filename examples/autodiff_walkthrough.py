"""The autodiff walkthrough of the JAX cookbook (and of MindSpore's quick tutorial), in s2s_ad.

Users of JAX or MindSpore's functional API know this tour; here every
function is plain NumPy (loops included) and every derivative is generated
source:

1. ``ad.grad`` of ``ad.grad``: derivatives of any order of a scalar function.
2. ``ad.grad`` with ``argnums`` and ``ad.value_and_grad`` on logistic
   regression (the loss loops over the training examples).
3. Checking gradients against central finite differences.
4. Hessian-vector products without forming the Hessian: ``ad.hvp``,
   ``ad.jvp`` of ``ad.grad`` (forward-over-reverse, as the JAX cookbook
   writes it), and the gradient of the directional derivative ``jvp(f)``
   (reverse-over-forward).  s2s_ad computes all three as reverse-over-forward
   (derivatives commute), so each is one generated function.
5. ``ad.jacfwd`` and ``ad.jacrev`` on a tall Jacobian (few inputs, many
   outputs: forward mode's case) and a wide one (many inputs, few outputs:
   reverse mode's case).
6. A dense Hessian as ``ad.jacfwd(ad.jacrev(f))``, and ``ad.hessian``.

Run it with ``python examples/autodiff_walkthrough.py``.
"""
import numpy as np

import s2s_ad as ad

# -- 1. derivatives of derivatives ---------------------------------------------


def tanh(x):
    """tanh written out, as in the cookbook."""
    y = np.exp(-2.0 * x)
    return (1.0 - y) / (1.0 + y)


# -- 2. logistic regression ------------------------------------------------------

INPUTS = np.array([[0.52, 1.12, 0.77],
                   [0.88, -1.08, 0.15],
                   [0.52, 0.06, -1.30],
                   [0.74, -2.49, 1.39]])
TARGETS = np.array([1.0, 1.0, 0.0, 1.0])


def sigmoid(z):
    return 0.5 * (np.tanh(z / 2.0) + 1.0)


def loss(W, b):
    """Negative log-likelihood of TARGETS, one training example per iteration."""
    total = 0.0
    for i in range(INPUTS.shape[0]):
        p = sigmoid(np.dot(INPUTS[i], W) + b)
        if TARGETS[i] > 0.5:
            total = total - np.log(p)
        else:
            total = total - np.log(1.0 - p)
    return total


# -- 4. and 6. a scalar function of a vector, for Hessians -----------------------


def chain(x):
    """sum_i tanh(x[i] * x[i+1]) + 0.1 * sum_i x[i]**3: a tridiagonal Hessian."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        s = s + np.tanh(x[i] * x[i + 1])
    for i in range(x.shape[0]):
        s = s + 0.1 * x[i] ** 3
    return s


def directional_derivative(x, v):
    """d/dt chain(x + t v) at t = 0, by forward mode; its gradient in x is H(x) v too."""
    return ad.jvp(chain, (x,), (v,))[1]


# -- 5. tall and wide Jacobians ----------------------------------------------------


def tall(x):
    """R^3 -> R^8: out[k] = sin(t_k x[0] + x[1]) * exp(-t_k x[2]), with t_k = k / 4."""
    out = np.zeros(8)
    for k in range(8):
        t = 0.25 * k
        out[k] = np.sin(t * x[0] + x[1]) * np.exp(-t * x[2])
    return out


def wide(x):
    """R^8 -> R^2: (log(1 + |x|^2), |x|^2 * sum_i (i + 1) tanh(x[i]))."""
    s = 0.0
    q = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * x[i]
        q = q + (i + 1.0) * np.tanh(x[i])
    return np.array([np.log1p(s), q * s])


def show(title, value):
    text = np.array2string(np.asarray(value), precision=6, suppress_small=True)
    print(f"{title}:\n{text}" if "\n" in text else f"{title}: {text}")


def main(eps=1e-4):
    r = {}

    # 1. grad is a function to function transform, so it applies to its own output.
    x0 = 2.0
    d1 = ad.grad(tanh)(x0)
    d2 = ad.grad(ad.grad(tanh))(x0)
    d3 = ad.grad(ad.grad(ad.grad(tanh)))(x0)
    print("1. derivatives of tanh at x = 2")
    print(f"  tanh(2)                             = {tanh(x0):.10f}")
    print(f"  ad.grad(tanh)(2)                    = {d1:.10f}")
    print(f"  ad.grad(ad.grad(tanh))(2)           = {d2:.10f}")
    print(f"  ad.grad(ad.grad(ad.grad(tanh)))(2)  = {d3:.10f}")
    fd1 = (tanh(x0 + eps) - tanh(x0 - eps)) / (2.0 * eps)
    print(f"  central difference of tanh at 2     = {fd1:.10f}")
    r.update(tanh_x=x0, tanh_derivatives=(d1, d2, d3), tanh_fd=fd1)

    # 2. Gradients of the logistic regression loss.
    rng = np.random.default_rng(0)
    W = rng.standard_normal(3)
    b = float(rng.standard_normal())
    print(f"\n2. logistic regression: W = {np.round(W, 6)}, b = {b:.6f}")
    W_grad = ad.grad(loss)(W, b)
    show("  ad.grad(loss)(W, b)                  dloss/dW", W_grad)
    W_grad2, b_grad = ad.grad(loss, argnums=(0, 1))(W, b)
    show("  ad.grad(loss, argnums=(0, 1))        dloss/dW", W_grad2)
    print(f"  {'':37}dloss/db = {b_grad:.10f}")
    value, (vg_W, vg_b) = ad.value_and_grad(loss, argnums=(0, 1))(W, b)
    print(f"  ad.value_and_grad(loss, argnums=(0, 1)): loss = {value:.10f}")
    r.update(logreg_params=(W, b), grad_W=W_grad, grad_Wb=(W_grad2, b_grad), value=value,
             value_and_grad=(vg_W, vg_b))

    # 3. Finite differences: along b, and along a random unit direction in W.
    b_fd = (loss(W, b + eps) - loss(W, b - eps)) / (2.0 * eps)
    direction = rng.standard_normal(3)
    direction = direction / np.sqrt(np.sum(direction * direction))
    W_fd = (loss(W + eps * direction, b) - loss(W - eps * direction, b)) / (2.0 * eps)
    W_ad = float(np.dot(W_grad, direction))
    print("\n3. against central finite differences (eps = 1e-4)")
    print(f"  dloss/db:          autodiff {b_grad:.10f}   finite difference {b_fd:.10f}")
    print(f"  dloss/dW . u:      autodiff {W_ad:.10f}   finite difference {W_fd:.10f}")
    r.update(direction=direction, b_fd=b_fd, W_fd=W_fd, W_ad=W_ad)

    # 4. Hessian-vector products, three ways; none forms the Hessian.
    x = np.array([0.3, -0.8, 1.1, 0.5, -0.4])
    v = np.array([1.0, 0.5, -0.25, 2.0, -1.0])
    print(f"\n4. Hessian-vector products of chain at x = {x}, v = {v}")
    hvp = ad.hvp(chain, (x,), (v,))
    show("  ad.hvp(chain, (x,), (v,))                ", hvp)
    grad_x, hvp_jvp = ad.jvp(ad.grad(chain), (x,), (v,))
    show("  ad.jvp(ad.grad(chain), (x,), (v,))[1]     (forward-over-reverse)", hvp_jvp)
    hvp_rf = ad.grad(directional_derivative)(x, v)
    show("  ad.grad(directional_derivative)(x, v)     (reverse-over-forward)", hvp_rf)
    r.update(hvp_x=x, hvp_v=v, hvp=hvp, hvp_jvp=hvp_jvp, hvp_jvp_primal=grad_x,
             hvp_rev_fwd=hvp_rf)

    # 5. Jacobians: jacfwd builds one column per input (a JVP each), jacrev one
    #    row per output (a VJP each); the results are the same.
    xt = np.array([0.7, -0.3, 0.2])
    xw = np.linspace(-1.0, 1.2, 8)
    tall_fwd, tall_rev = ad.jacfwd(tall)(xt), ad.jacrev(tall)(xt)
    wide_fwd, wide_rev = ad.jacfwd(wide)(xw), ad.jacrev(wide)(xw)
    print("\n5. Jacobians")
    print(f"  tall: R^3 -> R^8, Jacobian {tall_fwd.shape}: jacfwd needs 3 JVPs, jacrev 8 VJPs; "
          f"equal: {np.allclose(tall_fwd, tall_rev, rtol=1e-12, atol=1e-14)}")
    show("  ad.jacfwd(tall)(x)", tall_fwd)
    print(f"  wide: R^8 -> R^2, Jacobian {wide_rev.shape}: jacfwd needs 8 JVPs, jacrev 2 VJPs; "
          f"equal: {np.allclose(wide_fwd, wide_rev, rtol=1e-12, atol=1e-14)}")
    show("  ad.jacrev(wide)(x)", wide_rev)
    r.update(tall_x=xt, tall_jacfwd=tall_fwd, tall_jacrev=tall_rev,
             wide_x=xw, wide_jacfwd=wide_fwd, wide_jacrev=wide_rev)

    # 6. A dense Hessian: reverse mode inside (a gradient: a wide Jacobian),
    #    forward mode outside (the Jacobian of the gradient is square).
    H = ad.jacfwd(ad.jacrev(chain))(x)
    H2 = ad.hessian(chain)(x)
    print("\n6. dense Hessian of chain")
    show("  ad.jacfwd(ad.jacrev(chain))(x)", H)
    print(f"  equal to ad.hessian(chain)(x): {np.allclose(H, H2, rtol=1e-12, atol=1e-14)}; "
          f"symmetric: {np.allclose(H, H.T, rtol=1e-12, atol=1e-14)}; "
          f"H @ v equal to ad.hvp: {np.allclose(H @ v, hvp, rtol=1e-12, atol=1e-14)}")
    r.update(hessian_fwd_rev=H, hessian=H2)
    return r


if __name__ == "__main__":
    main()
