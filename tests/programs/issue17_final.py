"""User code calling np.pad, np.split and its variants, np.tile, np.repeat and
scipy.special.betaln (s2s_ad/rules/library/blocks.py, special.py)."""
import numpy as np
import scipy.special as sc


def pad_constant(x):
    return np.pad(x, 1) + 0.0 * np.pad(x, ((1, 1), (1, 1)), constant_values=2.0)


def pad_widths(x):
    return np.pad(x, ((2, 0), (1, 3)), "constant", constant_values=((0.5, 1.5), (2.5, 3.5)))


def pad_fill(x):
    """The fill value is differentiated too."""
    return np.pad(x, (1, 2), constant_values=x[0, 0] * x[1, 2])


def pad_edge(x):
    return np.pad(x, ((1, 2), (3, 0)), mode="edge")


def pad_reflect(x):
    return np.pad(x, 2, mode="reflect") + 0.0


def pad_symmetric_wrap(x):
    return np.pad(x, (1, 2), mode="symmetric") * np.pad(x, (2, 1), "wrap")


def pad_vector(x):
    return np.pad(x[0], (3, 2), "reflect") + np.pad(x[1], 5)[2:-3]


def split_sections(x):
    a, b = np.split(x, 2, axis=1)
    return a * np.sin(b)


def split_indices(x):
    a, b, c = np.split(x, [1, 3], axis=1)
    return np.concatenate((c * 2.0, a * b[:, :1], b ** 2), axis=1)


def array_split_uneven(x):
    a, b, c = np.array_split(x, 3, axis=1)
    return np.sum(a ** 2) + np.sum(np.sin(b)) * np.sum(c)


def hv_split(x):
    left, right = np.hsplit(x, 2)
    top, rest = np.vsplit(x, (1,))
    return left * right + np.sum(top) * np.sum(rest ** 2)


def tiles(x):
    return np.tile(x, (2, 1))[1:4] * np.tile(x[0], (3, 1))[:1, :].sum() + np.tile(x, 2)[:, ::2]


def tile_rank(x):
    return np.tile(x, (2, 1, 2))


def repeats(x):
    return np.repeat(x, 2, axis=1) + np.repeat(x * x, (1, 2, 0, 1), axis=1)[:, :4].sum()


def repeat_flat(x):
    return np.repeat(x, 3) * 2.0 + x.repeat(2, axis=0)[::2].ravel().sum()


def betaln(x):
    return sc.betaln(x, 2.0 * x + 0.5) + sc.betaln(x, 1.5)


def uneven_split(x):
    return np.split(x, 3, axis=1)[0]


def wide_reflect(x):
    return np.pad(x, 4, mode="reflect")


def odd_reflect(x):
    return np.pad(x, 1, mode="reflect", reflect_type="odd")


def loss(x):
    """Every case above in one scalar (one compiled function under ad.jit)."""
    return np.sum(np.sin(pad_constant(x) * 1.00)) + \
        np.sum(np.sin(pad_widths(x) * 1.05)) + \
        np.sum(np.sin(pad_fill(x) * 1.10)) + \
        np.sum(np.sin(pad_edge(x) * 1.15)) + \
        np.sum(np.sin(pad_reflect(x) * 1.20)) + \
        np.sum(np.sin(pad_symmetric_wrap(x) * 1.25)) + \
        np.sum(np.sin(pad_vector(x) * 1.30)) + \
        np.sum(np.sin(split_sections(x) * 1.35)) + \
        np.sum(np.sin(split_indices(x) * 1.40)) + \
        np.sum(np.sin(array_split_uneven(x) * 1.45)) + \
        np.sum(np.sin(hv_split(x) * 1.50)) + \
        np.sum(np.sin(tiles(x) * 1.55)) + \
        np.sum(np.sin(tile_rank(x) * 1.60)) + \
        np.sum(np.sin(repeats(x) * 1.65)) + \
        np.sum(np.sin(repeat_flat(x) * 1.70)) + \
        np.sum(np.sin(betaln(x) * 1.75))
