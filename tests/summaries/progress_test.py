"""Tests for the trainer's progress report (extreme_mem/train/trainer.py `progress`): a Keras-style
bar on a terminal, log lines otherwise, and an ETA that is an upper bound under early stopping."""

import io

from absl.testing import absltest

from extreme_mem.train import trainer


class _Terminal(io.StringIO):

    def isatty(self):
        return True


class ProgressTest(absltest.TestCase):

    def test_log_line_when_not_a_terminal(self):
        stream = io.StringIO()
        with self.assertLogs('absl', 'INFO') as logs:
            trainer.progress(250, 1000, 0.5, 0.75, rate=10.0, stream=stream)
        self.assertEqual(stream.getvalue(), '')
        # 750 steps left at 10 steps/s = 75 s.
        self.assertEqual(logs.records[0].getMessage(),
                         'step 250/1000  loss 0.5000  train acc (batches) 0.7500  10.0 steps/s  ETA 0:01:15')

    def test_early_stopping_makes_the_eta_an_upper_bound(self):
        with self.assertLogs('absl', 'INFO') as logs:
            trainer.progress(0, 7200, 2.3, 0.1, rate=1.0, early_stop=True, stream=io.StringIO())
        self.assertTrue(logs.records[0].getMessage().endswith('ETA ≤ 2:00:00'))

    def test_bar_redrawn_in_place_on_a_terminal(self):
        stream = _Terminal()
        with self.assertNoLogs('absl', 'INFO'):
            trainer.progress(10, 40, 1.0, 0.5, rate=2.0, line_end=False, stream=stream)
            trainer.progress(40, 40, 0.25, 1.0, rate=2.0, stream=stream)
        first, second = stream.getvalue().split('\r')[1:]
        bar = first.split('[')[1].split(']')[0]
        self.assertEqual(bar, '=' * 7 + '>' + '.' * 22)  # 10/40 of 30 characters
        self.assertEqual(first, f'10/40 [{bar}] - loss: 1.0000 - accuracy (batches): 0.5000 - 2.0 steps/s - ETA: 0:00:15')
        self.assertEqual(second, f'40/40 [{"=" * 30}] - loss: 0.2500 - accuracy (batches): 1.0000 - 2.0 steps/s - '
                                 'ETA: 0:00:00\n')


if __name__ == '__main__':
    absltest.main()
