"""Tests for extreme_mem/registry.py."""

from absl.testing import absltest

from extreme_mem import registry


class RegistryTest(absltest.TestCase):

    def test_register_and_get(self):
        r = registry.Registry('widget')

        @r.register('round_widget')
        def make():
            return 1

        self.assertIs(r.get('round_widget'), make)
        self.assertEqual(r.names(), ['round_widget'])
        self.assertIn('round_widget', r)

    def test_duplicate_raises(self):
        r = registry.Registry('widget')
        r.register('a')(object)
        with self.assertRaisesRegex(KeyError, "widget 'a' registered twice"):
            r.register('a')(int)

    def test_unknown_lists_known_and_closest(self):
        r = registry.Registry('widget')
        r.register('gradient_alignment')(object)
        r.register('accuracy')(object)
        with self.assertRaises(LookupError) as cm:
            r.get('gradient_alignmnt')
        msg = str(cm.exception)
        self.assertIn("Unknown widget 'gradient_alignmnt'", msg)
        self.assertIn("['accuracy', 'gradient_alignment']", msg)
        self.assertIn("Did you mean 'gradient_alignment'?", msg)

    def test_unknown_without_close_match_has_no_hint(self):
        r = registry.Registry('widget')
        r.register('accuracy')(object)
        with self.assertRaises(LookupError) as cm:
            r.get('zzz')
        self.assertNotIn('Did you mean', str(cm.exception))

    def test_builtin_plugins_registered(self):
        from extreme_mem import registry_imports  # noqa: F401

        for kind, name in [(registry.MODELS, 'mlp'), (registry.MODELS, 'convnet'), (registry.LOSSES, 'hinge'),
                           (registry.DATASETS, 'digits'), (registry.EXPERIMENTS, 'single_run'),
                           (registry.WRITERS, 'tensorboard')]:
            self.assertIn(name, kind)

    def test_every_plugin_module_imports(self):
        from extreme_mem import registry_imports  # noqa: F401

        self.assertEqual({k: repr(v) for k, v in registry_imports.FAILED.items()}, {})


if __name__ == '__main__':
    absltest.main()
