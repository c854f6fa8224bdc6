"""caffe2.python: Caffe2's Python modules as adapters over lockstep's."""
import sys

import numpy

from caffe2.python._unsupported import MissingModules

# Caffe2's programs (resnet50_trainer's test loop among them) call numpy.asscalar, which NumPy 1.23 removed;
# it was a.item().
if not hasattr(numpy, "asscalar"):
    numpy.asscalar = lambda a: a.item()

if not any(isinstance(finder, MissingModules) for finder in sys.meta_path):
    sys.meta_path.append(MissingModules())
