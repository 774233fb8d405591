"""extreme_mem: memorization vs generalization toolkit (Keras 3 / TensorFlow).

Importing the package is cheap: no TensorFlow import happens here. Plugins register themselves
when their modules are imported; `extreme_mem.registry_imports` imports all of them.
"""

__version__ = '0.1.0'


def load_run(workdir, with_model: bool = True):
    """A finished run's model, operative config and results (`extreme_mem.runs.load_run`)."""
    from extreme_mem import runs  # pylint: disable=g-import-not-at-top  (keeps `import extreme_mem` cheap)

    return runs.load_run(workdir, with_model=with_model)
