"""The adjoint of ``x[i] += v`` reads ``bx[i]`` and leaves it (reverse._increments)."""
import os
import sys

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.testing import check_grad

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs"))
import increments as P

X = np.array([0.3, -1.2, 0.8, 2.0, -0.4, 1.1])
BINS = np.array([0, 2, 1, 2, 0, 1])


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_increment_gradients_match_finite_differences(target):
    check_grad(P.histogram_energy, (X, BINS), argnums=0, target=target)
    check_grad(P.write_between, (X,), argnums=0, target=target)
    check_grad(P.named_increment, (X, BINS), argnums=0, target=target)
    check_grad(P.named_then_read, (X, BINS), argnums=0, target=target)


def test_increment_adjoint_neither_zeroes_nor_adds_back():
    src = ad.source(ad.grad(P.histogram_energy), X, BINS)
    body = src.split("adjoint of: h[bins[i]] += np.sin(x[i])")[1]
    assert "= 0.0" not in body.split("adjoint of")[0]
    assert src.count("bh[") == 1          # one read of the histogram's adjoint per sample


def test_a_write_in_between_keeps_the_general_adjoint():
    src = ad.source(ad.grad(P.write_between), X)
    assert "by[k] = 0.0" in src


def test_a_named_sum_nothing_reads_after_the_loop_is_an_increment():
    """``total = h[b] + v; h[b] = total``: the loop carries ``total`` only
    because Python keeps it, so its header is no use of it."""
    src = ad.source(ad.grad(P.named_increment), X, BINS)
    assert "= 0.0" not in src.split("adjoint of: h[bins[i]] = total")[1].split("adjoint of")[0]
    assert src.count("bh[") == 1


def test_a_named_sum_read_after_the_loop_keeps_the_general_adjoint():
    src = ad.source(ad.grad(P.named_then_read), X, BINS)
    assert "bh[_t" in src and "] = 0.0" in src, src
