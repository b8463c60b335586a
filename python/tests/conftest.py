"""Shared fixtures: the device the tests run on (libcltensor's default, $CLTENSOR_DEVICE)."""
import numpy as np
import pytest

import cltensor


@pytest.fixture(scope="session")
def dev():
    return cltensor.default_device()


def close(a, b, tol=1e-5):
    a = a.numpy() if isinstance(a, cltensor.Tensor) else np.asarray(a)
    np.testing.assert_allclose(a, np.asarray(b), rtol=tol, atol=tol)
