"""Tributary collectives as the torch.distributed backend "tributary".

Importing this module registers the backend:

    import torch.distributed as dist
    import torch_tributary  # noqa: F401
    dist.init_process_group("tributary", init_method=..., rank=..., world_size=...)

Rendezvous goes through the store torch.distributed hands the backend; the process group's
timeout bounds every wait. See docs/PYTORCH.md.
"""
import inspect

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from ._C import ProcessGroupTributary

__all__ = ["ProcessGroupTributary"]


def _create(store, rank, size, timeout):
    return ProcessGroupTributary(store, rank, size, timeout)


if "tributary" not in [b.lower() for b in getattr(dist.Backend, "_plugins", {})]:
    # PyTorch 2.x names the devices a backend serves; 1.x has no such argument.
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        dist.Backend.register_backend("tributary", _create, devices=["cpu"])
    else:
        dist.Backend.register_backend("tributary", _create)
