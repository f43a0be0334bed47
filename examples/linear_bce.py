"""A linear layer trained with binary cross-entropy: gradients with s2s_ad.

This is the model of MindSpore's functional-autodiff tutorial, written as
plain NumPy and differentiated by s2s_ad:

    z = x @ w + b
    loss = mean(binary_cross_entropy_with_logits(z, y))

It walks through ``ad.grad`` with ``argnums``, ``has_aux``,
``ad.stop_gradient``, ``ad.value_and_grad`` and ``ad.jit``.

Run it with ``python examples/linear_bce.py``.
"""
import numpy as np

import s2s_ad as ad


def bce_with_logits(z, y):
    """Mean binary cross-entropy of the logits ``z`` against the labels ``y``.

    Written as max(z, 0) - z*y + log(1 + exp(-|z|)), which equals
    -y*log(sigmoid(z)) - (1-y)*log(1 - sigmoid(z)) but never overflows
    ``exp`` nor takes the log of 0.
    """
    return np.mean(np.maximum(z, 0.0) - z * y + np.log1p(np.exp(-np.abs(z))))


def loss_fn(x, y, w, b):
    z = x @ w + b
    return bce_with_logits(z, y)


def loss_with_logits(x, y, w, b):
    """The loss and, as auxiliary output, the logits."""
    z = x @ w + b
    return bce_with_logits(z, y), z


def loss_with_stopped_logits(x, y, w, b):
    """As ``loss_with_logits``, but no derivative flows through the logits output."""
    z = x @ w + b
    return bce_with_logits(z, y), ad.stop_gradient(z)


def make_inputs(seed=0):
    """The tutorial's inputs: x = ones(5), y = zeros(3), w and b standard normal."""
    rng = np.random.default_rng(seed)
    x = np.ones(5)
    y = np.zeros(3)
    w = rng.standard_normal((5, 3))
    b = rng.standard_normal(3)
    return x, y, w, b


def show(title, value):
    print(f"{title}:\n{np.array2string(np.asarray(value), precision=6, suppress_small=True)}")


def main():
    x, y, w, b = make_inputs()
    print(f"loss = {loss_fn(x, y, w, b):.6f}\n")

    # 1. Gradients with respect to w and b (arguments 2 and 3).
    grad_fn = ad.grad(loss_fn, argnums=(2, 3))
    grad_w, grad_b = grad_fn(x, y, w, b)
    print("ad.grad(loss_fn, argnums=(2, 3))")
    show("  dloss/dw", grad_w)
    show("  dloss/db", grad_b)

    # 2. has_aux=True: the function returns (loss, z); z comes back as it is,
    #    and only the loss is differentiated.
    (aux_grad_w, aux_grad_b), z = ad.grad(loss_with_logits, argnums=(2, 3), has_aux=True)(
        x, y, w, b)
    print("\nad.grad(loss_with_logits, argnums=(2, 3), has_aux=True) -> (grads, z)")
    show("  z", z)
    show("  dloss/db", aux_grad_b)

    # 3. MindSpore's grad differentiates *every* output of a function that
    #    returns (loss, z), i.e. it pulls back a cotangent of ones through
    #    both.  ad.vjp makes that explicit: the gradient then includes
    #    d(sum z)/dw = outer(x, 1) and changes.
    _, vjp_fn = ad.vjp(loss_with_logits, x, y, w, b)
    both_outputs = (1.0, np.ones_like(z))
    _, _, both_grad_w, both_grad_b = vjp_fn(both_outputs)
    print("\nad.vjp(loss_with_logits, ...) with cotangent (1, ones): loss and z both pulled back")
    show("  d(loss + sum z)/db", both_grad_b)

    # 4. ad.stop_gradient on z cuts that second path: the same pull-back now
    #    gives the gradient of the loss alone, unchanged from step 1.
    _, vjp_stopped = ad.vjp(loss_with_stopped_logits, x, y, w, b)
    _, _, stop_grad_w, stop_grad_b = vjp_stopped(both_outputs)
    print("\nthe same, with ad.stop_gradient(z) as the second output")
    show("  dloss/db", stop_grad_b)
    same = np.allclose(stop_grad_w, grad_w) and np.allclose(stop_grad_b, grad_b)
    print(f"  equal to step 1: {same}")

    # 5. The loss and the gradients in one call.
    value, (vg_grad_w, vg_grad_b) = ad.value_and_grad(loss_fn, argnums=(2, 3))(x, y, w, b)
    print(f"\nad.value_and_grad(loss_fn, argnums=(2, 3)) -> loss = {value:.6f}")
    show("  dloss/db", vg_grad_b)

    # 6. The same generated gradient, compiled with Numba.
    jit_grad_w, jit_grad_b = ad.jit(ad.grad(loss_fn, argnums=(2, 3)))(x, y, w, b)
    print("\nad.jit(ad.grad(loss_fn, argnums=(2, 3)))")
    show("  dloss/db", jit_grad_b)
    same = np.allclose(jit_grad_w, grad_w) and np.allclose(jit_grad_b, grad_b)
    print(f"  equal to step 1: {same}")

    return {
        "inputs": (x, y, w, b),
        "grad": (grad_w, grad_b),
        "aux_grad": (aux_grad_w, aux_grad_b),
        "z": z,
        "both_outputs_grad": (both_grad_w, both_grad_b),
        "stop_gradient_grad": (stop_grad_w, stop_grad_b),
        "value": value,
        "value_and_grad": (vg_grad_w, vg_grad_b),
        "jit_grad": (jit_grad_w, jit_grad_b),
    }


if __name__ == "__main__":
    main()
