"""Tests for extreme_mem/train/schedules.py: the stagewise values the papers use."""

import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.train import schedules


class SchedulesTest(tf.test.TestCase, parameterized.TestCase):

    def test_geometry_paper_decay(self):
        # 0.2x at 30/60/80% of 1000 steps.
        s = schedules.stagewise(learning_rate=0.1, num_steps=1000, boundaries=(0.3, 0.6, 0.8), factor=0.2)
        expected = {0: 0.1, 300: 0.1, 301: 0.02, 600: 0.02, 601: 0.004, 800: 0.004, 801: 0.0008, 999: 0.0008}
        for step, value in expected.items():
            self.assertAllClose(float(s(step)), value, rtol=1e-6, msg=f'step {step}')

    def test_random_labels_paper_decay(self):
        # ÷3 at 1/3 and 2/3 of 900 steps.
        s = schedules.stagewise(learning_rate=0.9, num_steps=900, boundaries=(1 / 3, 2 / 3), factor=1 / 3)
        self.assertAllClose([float(s(t)) for t in (0, 300, 301, 600, 601, 899)], [0.9, 0.9, 0.3, 0.3, 0.1, 0.1],
                            rtol=1e-6)

    def test_constant(self):
        self.assertEqual(schedules.constant(0.05, num_steps=10), 0.05)

    @parameterized.parameters(((0.6, 0.3),), ((0.0, 0.5),), ((0.5, 1.0),))
    def test_bad_boundaries(self, boundaries):
        with self.assertRaisesRegex(ValueError, 'boundaries'):
            schedules.stagewise(0.1, num_steps=10, boundaries=boundaries)

    def test_bad_rate(self):
        with self.assertRaisesRegex(ValueError, 'learning_rate must be > 0'):
            schedules.constant(-1.0)


if __name__ == '__main__':
    tf.test.main()
