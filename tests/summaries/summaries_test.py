"""Tests for extreme_mem/summaries: results.json records and TensorBoard events."""

import glob
import json
import math
import os

import tensorflow as tf

from extreme_mem.summaries import results, writers


class ResultsTest(tf.test.TestCase):

    def test_record_layout_and_resume(self):
        run = self.create_tempdir().full_path
        rec = results.RunRecord(run, 'single_run', {'a': '1'})
        rec.add(0, {'train/accuracy': 0.1})
        rec.add(0, {'test/accuracy': 0.2})
        rec.add(10, {'train/accuracy': 0.5, 'train/loss': float('nan')})
        rec.add(15, {'train/grad_alignment/hidden': 0.25})
        rec.add(20, {'train/accuracy': 0.9})
        rec.finish('done', {'train/accuracy': 0.9})
        with open(os.path.join(run, 'results.json')) as f:
            data = json.load(f)
        self.assertEqual(set(data), {'experiment', 'config', 'status', 'final', 'history'})
        self.assertEqual(data['status'], 'done')
        # `final` holds the last logged value of every tag.
        self.assertEqual(data['final'], {'train/accuracy': 0.9, 'test/accuracy': 0.2,
                                         'train/grad_alignment/hidden': 0.25})
        self.assertEqual(data['history'][0], {'step': 0, 'train/accuracy': 0.1, 'test/accuracy': 0.2})
        self.assertIsNone(data['history'][1]['train/loss'])  # NaN is written as null
        self.assertEqual(results.series(data, 'train/accuracy'), ([0, 10, 20], [0.1, 0.5, 0.9]))
        again = results.RunRecord(run, 'single_run')
        again.resume(10)
        self.assertEqual([h['step'] for h in again.data['history']], [0, 10])

    def test_read_missing(self):
        self.assertIsNone(results.read(self.create_tempdir().full_path))


class TensorBoardWriterTest(tf.test.TestCase):

    def test_tags_split_into_directories(self):
        workdir = self.create_tempdir().full_path
        w = writers.TensorBoardWriter(workdir)
        w.write({'train/accuracy': 0.5, 'test/accuracy': 0.25, 'train/grad_alignment/hidden': 0.125}, step=7)
        w.close()
        seen = {}
        for split in ('train', 'test'):
            for path in glob.glob(os.path.join(workdir, 'tensorboard', split, 'events.*')):
                for event in tf.compat.v1.train.summary_iterator(path):
                    for v in event.summary.value:
                        seen[(split, v.tag, event.step)] = float(tf.make_ndarray(v.tensor))
        self.assertEqual(seen, {('train', 'accuracy', 7): 0.5, ('test', 'accuracy', 7): 0.25,
                                ('train', 'grad_alignment/hidden', 7): 0.125})
        self.assertFalse(math.isnan(seen[('train', 'accuracy', 7)]))


if __name__ == '__main__':
    tf.test.main()
