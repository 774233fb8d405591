"""Tests for extreme_mem/metrics/suite.py and the `needs` contract of metrics/base.py."""

import tensorflow as tf

from extreme_mem.metrics import base, suite
from extreme_mem.metrics import gradient_alignment, gradient_stiffness


class Fake(base.MetricPlugin):
    """Emits `{tag: number of updates}` since the last reset."""

    def __init__(self, tag, every_n_steps=None, needs=frozenset(), eval_tags=None):
        super().__init__(every_n_steps)
        self.needs, self._tag, self._eval_tags, self.count = frozenset(needs), tag, eval_tags or {}, 0

    def update(self, outputs):
        self.count += 1

    def result(self):
        return {self._tag: float(self.count)}

    def reset(self):
        self.count = 0

    def evaluate(self, context):
        return dict(self._eval_tags)


class MetricSuiteTest(tf.test.TestCase):

    def test_gram_is_needed_only_on_the_steps_of_the_plugin_that_wants_it(self):
        s = suite.MetricSuite([gradient_alignment.GradientAlignment(every_n_steps=2),
                               gradient_stiffness.GradientStiffness(every_n_steps=3)])
        Need = base.Need
        self.assertEqual(s.needs(1), frozenset())
        self.assertEqual(s.needs(2), {Need.OUTPUTS, Need.GRAD_STATS})
        self.assertEqual(s.needs(3), {Need.OUTPUTS, Need.GRAD_STATS, Need.GRAM})
        self.assertEqual(s.needs(6), {Need.OUTPUTS, Need.GRAD_STATS, Need.GRAM})

    def test_outputs_only_plugin_still_gets_an_observed_step(self):
        self.assertEqual(suite.MetricSuite([Fake('t/a', every_n_steps=5)]).needs(10), {base.Need.OUTPUTS})

    def test_update_result_only_for_plugins_that_run(self):
        a, b = Fake('t/a', every_n_steps=2), Fake('t/b', every_n_steps=3)
        s = suite.MetricSuite([a, b])
        for step in range(7):
            s.update(step, None)
        self.assertEqual((a.count, b.count), (4, 3))  # steps 0,2,4,6 and 0,3,6
        self.assertEqual(s.result(6), {'t/a': 4.0, 't/b': 3.0})
        self.assertEqual(s.result(4), {'t/a': 4.0})
        s.reset()
        self.assertEqual(s.result(6), {'t/a': 0.0, 't/b': 0.0})

    def test_repeated_tag_names_both_plugins(self):
        class Other(Fake):
            pass

        s = suite.MetricSuite([Fake('t/a', every_n_steps=1), Other('t/a', every_n_steps=1)])
        with self.assertRaisesRegex(ValueError, r"'t/a' emitted by two plugins \(Fake and Other\)"):
            s.result(0)
        e = suite.MetricSuite([Fake('x', eval_tags={'eval/q': 1.0}), Other('y', eval_tags={'eval/q': 2.0})])
        with self.assertRaisesRegex(ValueError, r"'eval/q' emitted by two plugins \(Fake and Other\)"):
            e.evaluate(None)

    def test_evaluate_merges(self):
        s = suite.MetricSuite([Fake('x', eval_tags={'eval/p': 1.0}), Fake('y', eval_tags={'eval/q': 2.0})])
        self.assertEqual(s.evaluate(None), {'eval/p': 1.0, 'eval/q': 2.0})


class NeedsContractTest(tf.test.TestCase):

    def test_unknown_need_fails_at_class_definition(self):
        with self.assertRaisesRegex(ValueError, r"Bad.needs has unknown entries \['gradstats'\]; valid: "):
            class Bad(base.MetricPlugin):  # noqa: F841
                needs = frozenset({'gradstats'})

    def test_gram_implies_grad_stats_and_sets_wants_gram(self):
        class G(base.MetricPlugin):
            needs = frozenset({base.Need.GRAM})

        self.assertEqual(G.needs, {base.Need.GRAM, base.Need.GRAD_STATS})
        self.assertTrue(G.wants_gram)
        self.assertFalse(gradient_alignment.GradientAlignment.wants_gram)

    def test_removed_full_dataset_is_refused(self):
        with self.assertRaisesRegex(ValueError, r"Legacy.needs has unknown entries \['full_dataset'\]"):
            class Legacy(base.MetricPlugin):  # pylint: disable=unused-variable
                needs = frozenset({'full_dataset'})

    def test_every_n_steps_validated(self):
        for bad in (0, -1, True, 2.0):
            with self.assertRaisesRegex(ValueError, 'every_n_steps must be a positive integer or None'):
                Fake('t', every_n_steps=bad)


if __name__ == '__main__':
    tf.test.main()
