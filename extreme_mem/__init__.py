"""extreme_mem: memorization vs generalization toolkit (Keras 3 / TensorFlow).

Importing the package is cheap: no TensorFlow import happens here. Plugins register themselves
when their modules are imported; `extreme_mem.registry_imports` imports all of them.
"""

__version__ = '0.1.0'
