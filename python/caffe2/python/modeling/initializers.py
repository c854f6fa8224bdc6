"""Caffe2's parameter initializers: an Initializer names a fill operator and its arguments; brew.conv and
brew.fc take it (or the class) as ``WeightInitializer`` / ``BiasInitializer``."""
from caffe2.python._unsupported import missing_names, refuse


class Initializer:
    """A float32 parameter filled by ``operator_name`` with ``kwargs``; without a name, the layer's
    ``weight_init`` / ``bias_init`` (or its default) decides."""

    def __init__(self, operator_name=None, **kwargs):
        self.operator_name = operator_name
        self.operator_kwargs = kwargs

    def update(self, operator_name, kwargs):
        if self.operator_name is not None:
            refuse("Initializer.update: the initializer already has an operator")
        self.operator_name = operator_name
        self.operator_kwargs = kwargs

    def fill(self, default):
        """The (fill type, args) pair lockstep's brew takes: this initializer's, else ``default``."""
        if self.operator_name is None:
            return default
        return (self.operator_name, dict(self.operator_kwargs))


class PseudoFP16Initializer(Initializer):
    """Caffe2's float16 parameters with float32 master copies: refused where used (lockstep keeps parameters
    float32 and casts in the forward pass: lockstep.mixed_precision)."""


def update_initializer(initializer_class, operator_name_and_kwargs, default_operator_name_and_kwargs):
    """The Initializer a layer uses: ``initializer_class`` (default Initializer) given the layer's
    (fill type, args), or its default."""
    initializer_class = initializer_class or Initializer
    if isinstance(initializer_class, Initializer):
        return initializer_class
    fill = operator_name_and_kwargs or default_operator_name_and_kwargs
    return initializer_class(fill[0], **fill[1])


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.modeling.initializers")
