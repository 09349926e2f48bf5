# Prints what CMake needs to build against this interpreter's torch, as KEY=VALUE lines.
import os
import sysconfig

import torch

root = os.path.dirname(torch.__file__)
print("VERSION=" + torch.__version__)
print("INCLUDE_DIR=" + os.path.realpath(os.path.join(root, "include")))
print("LIB_DIR=" + os.path.join(root, "lib"))
print("CXX11_ABI=" + str(int(torch._C._GLIBCXX_USE_CXX11_ABI)))
print("PYTHON_INCLUDE=" + sysconfig.get_paths()["include"])
print("EXT_SUFFIX=" + sysconfig.get_config_var("EXT_SUFFIX"))
try:
    import pybind11

    print("PYBIND11_DIR=" + pybind11.get_include())
except ImportError:
    pass
