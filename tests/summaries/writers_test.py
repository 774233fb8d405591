"""Tests for extreme_mem/summaries/writers.py: TensorBoard event contents, console lines, dispatch."""

import glob
import os

import numpy as np
import tensorflow as tf

from extreme_mem import registry
from extreme_mem.summaries import writers


def _events(workdir: str) -> dict:
    """{(split directory, scalar tag, step): value} of every TensorBoard event file under `workdir`."""
    seen = {}
    for path in glob.glob(os.path.join(workdir, 'tensorboard', '*', 'events.*')):
        split = os.path.basename(os.path.dirname(path))
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                key = (split, v.tag, event.step)
                if key in seen:
                    raise AssertionError(f'{key} written twice')
                seen[key] = float(tf.make_ndarray(v.tensor))
    return seen


class TensorBoardWriterTest(tf.test.TestCase):

    def test_tags_go_to_split_directories_at_their_steps(self):
        workdir = self.create_tempdir().full_path
        w = writers.TensorBoardWriter(workdir)
        w.write({'train/loss': 2.5, 'test/accuracy': np.float32(0.75), 'train/grad_alignment/hidden': 0.125}, step=1)
        w.write({'train/loss': tf.constant(1.25), 'eval/mftma/capacity/conv3': 3}, step=np.int64(5))
        w.flush()  # readable before close
        self.assertEqual(_events(workdir), {
            ('train', 'loss', 1): 2.5,
            ('test', 'accuracy', 1): 0.75,
            ('train', 'grad_alignment/hidden', 1): 0.125,
            ('train', 'loss', 5): 1.25,
            ('eval', 'mftma/capacity/conv3', 5): 3.0,
        })
        self.assertCountEqual(os.listdir(os.path.join(workdir, 'tensorboard')), ['train', 'test', 'eval'])
        w.close()

    def test_tag_without_split_uses_its_own_directory(self):
        workdir = self.create_tempdir().full_path
        w = writers.TensorBoardWriter(workdir)
        w.write({'learning_rate': 0.5}, step=2)
        w.close()
        self.assertEqual(_events(workdir), {('learning_rate', 'learning_rate', 2): 0.5})

    def test_one_event_file_per_split(self):
        workdir = self.create_tempdir().full_path
        w = writers.TensorBoardWriter(workdir)
        for step in range(3):
            w.write({'train/loss': float(step)}, step=step)
        w.close()
        self.assertLen(glob.glob(os.path.join(workdir, 'tensorboard', 'train', 'events.*')), 1)
        self.assertEqual(_events(workdir), {('train', 'loss', s): float(s) for s in range(3)})


class ConsoleWriterTest(tf.test.TestCase):

    def test_logs_metric_tags_sorted_not_loss_or_accuracy(self):
        w = writers.ConsoleWriter(workdir='unused')
        results = {'train/loss': 1.0, 'test/accuracy': 0.5, 'train/grad_alignment/hidden': 0.123456,
                   'eval/mftma/capacity/conv3': 2.0}
        with self.assertLogs('absl', 'INFO') as logs:
            w.write(results, step=3)
        self.assertLen(logs.records, 1)
        self.assertEqual(logs.records[0].getMessage(),
                         'step 3: eval/mftma/capacity/conv3 2  train/grad_alignment/hidden 0.1235')

    def test_silent_for_loss_and_accuracy_only(self):
        w = writers.ConsoleWriter(workdir='unused')
        with self.assertNoLogs('absl', 'INFO'):
            w.write({'train/loss': 1.0, 'train/accuracy': 0.5, 'test/loss': 2.0}, step=1)
        w.flush()
        w.close()


class WritersTest(tf.test.TestCase):

    def test_dispatches_to_every_writer(self):
        workdir = self.create_tempdir().full_path
        dispatcher = writers.Writers(['tensorboard', 'console'], workdir)
        with self.assertLogs('absl', 'INFO') as logs:
            dispatcher.write({'train/loss': 0.5, 'train/weight_norm/hidden': 4.0}, step=7)
        dispatcher.flush()
        self.assertEqual(_events(workdir), {('train', 'loss', 7): 0.5, ('train', 'weight_norm/hidden', 7): 4.0})
        self.assertEqual([r.getMessage() for r in logs.records], ['step 7: train/weight_norm/hidden 4'])
        dispatcher.close()

    def test_no_writers(self):
        workdir = self.create_tempdir().full_path
        dispatcher = writers.Writers([], workdir)
        dispatcher.write({'train/loss': 0.5}, step=1)
        dispatcher.close()
        self.assertFalse(os.path.exists(os.path.join(workdir, 'tensorboard')))

    def test_unknown_writer_lists_the_known_ones(self):
        with self.assertRaisesRegex(LookupError, r"Unknown writer 'tensorbord'.*'console'.*'tensorboard'.*Did you mean"):
            writers.Writers(['tensorbord'], self.create_tempdir().full_path)

    def test_registered(self):
        self.assertIs(registry.WRITERS.get('tensorboard'), writers.TensorBoardWriter)
        self.assertIs(registry.WRITERS.get('console'), writers.ConsoleWriter)


if __name__ == '__main__':
    tf.test.main()
