"""Tests for extreme_mem/summaries/results.py: bad results.json files name their path; the
record keeps an earlier attempt's history until `resume` cuts it; `config_hash` is written."""

import json
import pathlib

import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.summaries import results


class ReadTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.named_parameters(
        ('garbage', b'{"status": "do', 'not a readable results record'),
        ('empty', b'', 'not a readable results record'),
        ('binary', b'\xff\xfe\x00', 'not a readable results record'),
        ('list', b'[1, 2, 3]', 'expected a JSON object, got list'),
        ('bad_history', b'{"history": [1, 2]}', '"history" must be a list'),
        ('bad_final', b'{"final": [1]}', '"final" must be an object'),
    )
    def test_invalid_record_names_the_path(self, content, message):
        run = pathlib.Path(self.create_tempdir().full_path)
        (run / 'results.json').write_bytes(content)
        with self.assertRaisesRegex(results.ResultsError, f'{run / "results.json"}.*{message}'):
            results.read(run)
        with self.assertLogs('absl', level='WARNING') as logs:
            self.assertIsNone(results.read_or_none(run))
        self.assertIn(str(run / 'results.json'), logs.output[0])

    def test_valid_and_missing(self):
        run = pathlib.Path(self.create_tempdir().full_path)
        self.assertIsNone(results.read(run))
        self.assertIsNone(results.read_or_none(run))
        (run / 'results.json').write_text(json.dumps({'status': 'done', 'history': [{'step': 0}], 'final': {}}))
        self.assertEqual(results.read_or_none(run)['status'], 'done')


class RunRecordTest(tf.test.TestCase):

    def test_config_hash_is_written(self):
        run = self.create_tempdir().full_path
        results.RunRecord(run, 'single_run', {'a': 1}, config_hash='abc123').save()
        self.assertEqual(results.read(run)['config_hash'], 'abc123')

    def test_early_save_keeps_history_until_resume(self):
        run = self.create_tempdir().full_path
        first = results.RunRecord(run, 'single_run')
        for step in (0, 5, 10, 15):
            first.add(step, {'train/loss': 1.0 / (step + 1)})
        first.save()
        second = results.RunRecord(run, 'single_run')
        second.save()  # written before training resumes: must not erase the earlier history
        self.assertEqual([h['step'] for h in results.read(run)['history']], [0, 5, 10, 15])
        second.resume(10)
        self.assertEqual([h['step'] for h in second.data['history']], [0, 5, 10])
        second.resume(0)  # starting over keeps only the step-0 evaluation, which is redone anyway
        self.assertEqual([h['step'] for h in second.data['history']], [0])

    def test_garbage_previous_record_is_not_fatal_to_a_new_record(self):
        run = pathlib.Path(self.create_tempdir().full_path)
        (run / 'results.json').write_text('[1, 2, 3]')
        with self.assertLogs('absl', level='WARNING'):
            record = results.RunRecord(run, 'single_run')
        self.assertEqual(record.data['history'], [])


if __name__ == '__main__':
    tf.test.main()
