"""__getitem__ / __setitem__ against NumPy's indexing (PyTorch's is the same for these)."""
import numpy as np
import pytest

import cltensor

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)


@pytest.mark.parametrize("key", [
    0, -1, (1, 2), (1, 2, 3), slice(1, None), slice(None, None, 2), (slice(None), slice(1, 4, 2)),
    (Ellipsis, 1), (None, 0), (0, None, Ellipsis, None), (slice(None), None, 2),
    [2, 0], ([0, 2], [1, 3]), (slice(None), [3, 0, 3]), (1, slice(None), [0, -1]), ([[0], [2]], [1, 2]),
    (slice(None), [0, 1], 2), ([0, 1], slice(None), [2, 3]), (-2, Ellipsis, slice(None, None, 3)),
])
def test_getitem_matches_numpy(dev, key):
    t = cltensor.tensor(X)
    got = t[key]
    ref = X[key]
    assert got.shape == ref.shape, key
    np.testing.assert_array_equal(got.numpy(), ref)


def test_tensor_and_mask_indices(dev):
    t = cltensor.tensor(X)
    idx = cltensor.tensor([2, -1, 0])
    np.testing.assert_array_equal(t[idx].numpy(), X[[2, -1, 0]])
    np.testing.assert_array_equal(t[:, idx].numpy(), X[:, [2, -1, 0]])
    mask = t > 30
    np.testing.assert_array_equal(t[mask].numpy(), X[X > 30])
    np.testing.assert_array_equal(t[mask[:, :, 0]].numpy(), X[X[:, :, 0] > 30])


def test_basic_indices_are_views(dev):
    t = cltensor.tensor(X)
    v = t[1, :, ::2]
    v.fill_(0)
    ref = X.copy()
    ref[1, :, ::2] = 0
    np.testing.assert_array_equal(t.numpy(), ref)


def test_setitem(dev):
    t = cltensor.tensor(X)
    ref = X.copy()
    t[0] = 1.0
    ref[0] = 1.0
    t[1, 1:3] = cltensor.tensor([7.0, 8, 9, 10, 11])
    ref[1, 1:3] = [7.0, 8, 9, 10, 11]
    t[t > 50] = -1
    ref[ref > 50] = -1
    np.testing.assert_array_equal(t.numpy(), ref)


def test_index_errors(dev):
    t = cltensor.tensor(X)
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(IndexError):
        t[0, 0, 0, 0]
    with pytest.raises(IndexError):
        t[[0, 5]]
    with pytest.raises(cltensor.InvalidArgumentError):
        t[cltensor.tensor([0, 5])]
    with pytest.raises(cltensor.InvalidArgumentError):
        t[::-1]
