import numpy as np
import pytest
import torch

from viewlab import shares_storage


def test_views_share_and_copies_do_not():
    x = torch.arange(12.0).view(3, 4)
    assert shares_storage(x, x[1:, 2:])
    assert shares_storage(x[0], x[2])  # disjoint elements, same storage
    assert shares_storage(x.t(), x.view(12))
    assert not shares_storage(x, x.clone())
    assert not shares_storage(x, x.contiguous().t().contiguous())


def test_empty_storages_compare_by_identity():
    a = torch.empty(0)
    assert shares_storage(a, a.view(0, 3))
    assert not shares_storage(a, torch.empty(0))


def test_numpy_round_trips_share_memory():
    x = torch.arange(6.0)
    assert shares_storage(x, x.numpy())
    assert shares_storage(x[3:], x.numpy())
    arr = np.arange(6.0)
    assert shares_storage(torch.from_numpy(arr), arr[::2])
    assert not shares_storage(torch.tensor(arr), arr)  # torch.tensor always copies


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device to hold a second copy")
def test_different_devices_never_share():
    x = torch.arange(4.0)
    y = x.cuda()
    assert not shares_storage(x, y)
    assert shares_storage(y, y[1:])


def test_meta_tensors_are_rejected_with_a_reason():
    with pytest.raises(ValueError, match="meta tensor"):
        shares_storage(torch.zeros(2, device="meta"), torch.zeros(2))


def test_non_tensor_is_rejected_with_what_to_pass():
    with pytest.raises(TypeError, match="expects a torch.Tensor for `b`"):
        shares_storage(torch.zeros(2), [0.0, 0.0])
