"""Tests for extreme_mem/train/checkpoints.py through `Trainer.fit`: the issue-9 checkpoint probes.

Each test damages a run directory the way a user or a killed process would (truncated data
file, deleted files still named by the index, a garbled index, nothing readable) and checks
the recovery against an uninterrupted run, with the real `RunObserver` and `RunRecord` keeping
`results.json` history up to the restored step.
"""

import json
import os
import pathlib

import tensorflow as tf

from extreme_mem import losses
from extreme_mem.experiments import observer as observer_lib
from extreme_mem.metrics import suite as suite_lib
from extreme_mem.models import mlp
from extreme_mem.summaries import results
from extreme_mem.train import checkpoints, trainer
from tests import testing

KWARGS = dict(learning_rate=0.1, momentum=0.9, batch_size=8, num_steps=30, eval_every=5, checkpoint_every=10,
              log_every=100, max_checkpoints=3)


class NullWriters:
    def write(self, values, step):
        del values, step

    def flush(self):
        pass


def model():
    return mlp.mlp((5,), 3, width=6, activation='tanh', initializer='glorot_uniform', init_scale=1.0, seed=3)


class CheckpointFallbackTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        self.data = testing.blobs(num_train=50)

    def _fit(self, workdir, observer=None, **kwargs):
        m = model()
        t = trainer.Trainer(m, losses.cross_entropy, 3, **{**KWARGS, **kwargs})
        return m, t.fit(self.data, workdir, 0, observer)

    def _run(self, workdir, **kwargs):
        """A run with the real observer and results record, as the experiment wires them."""
        record = results.RunRecord(workdir, 'single_run', {})
        record.save()  # as the experiment does before training
        m, fit = self._fit(workdir, observer_lib.RunObserver(suite_lib.MetricSuite([]), NullWriters(), record, None,
                                                             self.data), **kwargs)
        record.finish(fit.status, fit.final)
        return m, fit, record.data

    def _interrupted(self, at=27):
        """A workdir with checkpoints 10 and 20 and history to step 25, killed at step `at`."""
        workdir = self.create_tempdir().full_path
        record = results.RunRecord(workdir, 'single_run', {})

        class Killed(observer_lib.RunObserver):
            def needs(self, step):
                if step == at:
                    raise KeyboardInterrupt()
                return super().needs(step)

        with self.assertRaises(KeyboardInterrupt):
            self._fit(workdir, Killed(suite_lib.MetricSuite([]), NullWriters(), record, None, self.data))
        return workdir

    def _whole(self):
        m, fit, record = self._run(self.create_tempdir().full_path)
        return m, fit, record

    def test_truncated_newest_checkpoint_falls_back_to_the_older_one(self):
        whole_model, whole, whole_record = self._whole()
        workdir = self._interrupted()
        ckpt = pathlib.Path(workdir) / 'checkpoints'
        data_file = next(ckpt.glob('ckpt-20.data-*'))
        data_file.write_bytes(data_file.read_bytes()[:20])
        history = json.loads((pathlib.Path(workdir) / 'results.json').read_text())['history']
        self.assertEqual([h['step'] for h in history], [0, 5, 10, 15, 20, 25])
        with self.assertLogs('absl', level='WARNING') as logs:
            m, fit, record = self._run(workdir)
        self.assertRegex('\n'.join(logs.output), r'ckpt-20 is unreadable.*\n.*Resuming from .*ckpt-10')
        self.assertEqual((fit.status, fit.step), ('done', 30))
        self.assertEqual(fit.final, whole.final)
        for a, b in zip(m.get_weights(), whole_model.get_weights()):
            self.assertAllEqual(a, b)
        self.assertEqual(record['history'], whole_record['history'])  # history cut at 10, then redone
        self.assertTrue((ckpt / checkpoints.UNREADABLE_DIR / data_file.name).exists())  # kept, not deleted

    def test_deleted_files_still_named_by_the_index(self):
        _, whole, whole_record = self._whole()
        workdir = self._interrupted()
        ckpt = pathlib.Path(workdir) / 'checkpoints'
        for f in ckpt.glob('ckpt-20.*'):
            f.unlink()
        self.assertIn('ckpt-20', (ckpt / 'checkpoint').read_text())
        restored = []

        class Spy(observer_lib.RunObserver):
            def on_restore(self, step):
                restored.append(step)
                super().on_restore(step)

        record = results.RunRecord(workdir, 'single_run', {})
        record.save()
        self.assertLen(record.data['history'], 6)  # an early save erases nothing
        _, fit = self._fit(workdir, Spy(suite_lib.MetricSuite([]), NullWriters(), record, None, self.data))
        record.finish(fit.status, fit.final)
        self.assertEqual(restored, [10])
        self.assertEqual(fit.final, whole.final)
        self.assertEqual(record.data['history'], whole_record['history'])

    def test_garbled_index_file(self):
        _, whole, _ = self._whole()
        workdir = self._interrupted()
        (pathlib.Path(workdir) / 'checkpoints' / 'checkpoint').write_text('model_checkpoint_path: ]]] garbage')
        _, fit, _ = self._run(workdir)
        self.assertEqual(fit.final, whole.final)

    def test_nothing_readable_raises_naming_the_way_out(self):
        workdir = self._interrupted()
        ckpt = pathlib.Path(workdir) / 'checkpoints'
        for f in ckpt.glob('ckpt-*.data-*'):
            f.write_bytes(b'')
        before = sorted(p.name for p in ckpt.iterdir())
        with self.assertRaisesRegex(checkpoints.CheckpointError,
                                    r'No checkpoint in .*checkpoints can be read \(ckpt-20: .*ckpt-10: .*\).*'
                                    r'start_over_if_unreadable'):
            self._fit(workdir)
        self.assertEqual(sorted(p.name for p in ckpt.iterdir()), before)  # nothing moved or deleted

    def test_nothing_readable_starts_over_when_asked(self):
        whole_model, whole, whole_record = self._whole()
        workdir = self._interrupted()
        for f in (pathlib.Path(workdir) / 'checkpoints').glob('ckpt-*.data-*'):
            f.write_bytes(b'\0' * 7)
        m, fit, record = self._run(workdir, start_over_if_unreadable=True)
        self.assertEqual(fit.final, whole.final)  # the failed restores left nothing behind
        for a, b in zip(m.get_weights(), whole_model.get_weights()):
            self.assertAllEqual(a, b)
        self.assertEqual(record['history'], whole_record['history'])

    def test_divergence_names_the_kept_checkpoint(self):
        workdir = self.create_tempdir().full_path
        m = model()

        class PoisonAfter(trainer.Observer):
            def needs(self, step):
                return frozenset({'outputs'}) if step == 13 else frozenset()

            def on_step(self, step, outputs):
                kernel = m.get_layer('logits').kernel
                kernel.assign(kernel * float('nan'))

        t = trainer.Trainer(m, losses.cross_entropy, 3, **KWARGS)
        with self.assertLogs('absl', level='ERROR') as logs:
            fit = t.fit(self.data, workdir, 0, PoisonAfter())
        self.assertEqual((fit.status, fit.step), ('diverged', 15))
        self.assertRegex('\n'.join(logs.output), r'non-finite training loss at step 15; kept checkpoint .*ckpt-10 \(step 10\)')
        self.assertEqual(checkpoints.step_of(tf.train.latest_checkpoint(os.path.join(workdir, 'checkpoints'))), 10)


if __name__ == '__main__':
    tf.test.main()
