"""A rank's part of a distributed tensor (torch.distributed.tensor's
DTensor, as transformers' tp_plan makes them): what a rank's files hold is
its local tensor, and attaching wraps the mapped one back with the model's
mesh and placements. Plain tensors pass through. No import of
torch.distributed unless a DTensor is there."""


def is_dtensor(t):
    # By class name: no import, and no attribute lookups, which a tensor
    # answers slowly when it lacks them (a model has hundreds).
    return any(c.__name__ == "DTensor" for c in type(t).__mro__)


def local(t):
    """The rank's own tensor of `t`."""
    return t.to_local() if is_dtensor(t) else t


def local_shape(t):
    return tuple(local(t).shape)


def split_of(t):
    """How `t` is split across ranks, for a rank's record: its placements
    and global shape, or None for a plain tensor."""
    if not is_dtensor(t):
        return None
    return {"placements": [str(p) for p in t.placements], "shape": list(t.shape)}


def like(mapped, model_tensor):
    """`mapped` (the rank's local tensor) as the model's tensor is: a
    DTensor on its mesh with its placements, or itself."""
    if not is_dtensor(model_tensor):
        return mapped
    from torch.distributed.tensor import DTensor
    return DTensor.from_local(mapped, model_tensor.device_mesh, model_tensor.placements, run_check=False,
                              shape=model_tensor.shape, stride=model_tensor.stride())
