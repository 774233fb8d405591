"""Tests for extreme_mem/summaries/tensorboard.py and the sweep's TensorBoard layout.

Unit tests read the event files back with `tf.compat.v1.train.summary_iterator`; the acceptance
test starts a real `tensorboard` server over a 2-run sweep and reads its HTTP data API.
"""

import glob
import html
import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import gin
import numpy as np
import pytest
import tensorflow as tf

from extreme_mem import config
from extreme_mem.experiments import sweep_experiment
from extreme_mem.summaries import tensorboard as tb
from extreme_mem.summaries import writers
from extreme_mem.train import trainer as trainer_lib
from tests import testing


def _values(directory: str) -> list:
    """[(tag, step, plugin name, summary value)] of the event files directly in `directory`."""
    out = []
    for path in sorted(glob.glob(os.path.join(directory, 'events.*'))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                out.append((v.tag, event.step, v.metadata.plugin_data.plugin_name, v))
    return out


class HParamsTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_binding_hparams_parse_literals_and_keep_text(self):
        self.assertEqual(tb.binding_hparams(['INIT_SCALE = 10.0', 'models.mlp.activation = @sin',
                                             "experiments.Experiment.dataset = 'digits'", 'not a binding',
                                             'models.mlp.width=8', 'INIT_SCALE = 1e-3', 'X = [1, 2]']),
                         {'INIT_SCALE': 0.001, 'models.mlp.activation': '@sin',
                          'experiments.Experiment.dataset': 'digits', 'models.mlp.width': 8, 'X': '[1, 2]'})

    def test_run_hparams_use_gin_values_then_defaults_then_bindings(self):
        config.parse_gin([], ['train.Trainer.learning_rate = 0.5', 'INIT_SCALE = 3.0'], finalize=False)
        _, bindings = config.parsed_files_and_bindings()
        hparams = tb.run_hparams(bindings, trainer_lib.Trainer, gin_files=['/x/gin/a.gin'], dataset='digits', seed=1)
        defaults = inspect.signature(trainer_lib.Trainer.__init__).parameters
        self.assertEqual(hparams['learning_rate'], 0.5)
        self.assertEqual(hparams['batch_size'], defaults['batch_size'].default)
        self.assertEqual(hparams['optimizer'], defaults['optimizer'].default)
        self.assertEqual(hparams['stop_accuracy'], 'None')
        self.assertEqual(hparams['INIT_SCALE'], 3.0)
        self.assertEqual(hparams['train.Trainer.learning_rate'], 0.5)
        self.assertEqual((hparams['dataset'], hparams['seed'], hparams['gin_files']), ('digits', 1, 'a.gin'))

    def test_hparams_and_config_text_events(self):
        directory = self.create_tempdir().full_path
        tb.write_hparams(directory, {'INIT_SCALE': np.float32(0.5), 'model': 'mlp', 'bad': None})
        tb.write_config(directory, 'a.b = 1\nc = "```"', step=7)
        events = _values(directory)
        self.assertEqual([(t, s, p) for t, s, p, _ in events],
                         [('_hparams_/session_start_info', 0, 'hparams'), (tb.CONFIG_TAG, 7, 'text')])
        from tensorboard.plugins.hparams import plugin_data_pb2  # pylint: disable=g-import-not-at-top

        data = plugin_data_pb2.HParamsPluginData.FromString(events[0][3].metadata.plugin_data.content)
        hp = data.session_start_info.hparams
        self.assertEqual((hp['INIT_SCALE'].number_value, hp['model'].string_value, hp['bad'].string_value),
                         (0.5, 'mlp', 'None'))
        text = tf.make_ndarray(events[1][3].tensor).item().decode()
        self.assertEqual(text, '```\na.b = 1\nc = "\'\'\'"\n```')


class LayoutTest(tf.test.TestCase):

    def test_link_run_is_relative_and_replaced_but_never_clobbers_a_directory(self):
        root = self.create_tempdir().full_path
        link = tb.link_run(os.path.join(root, 'tensorboard'), 'A=1', os.path.join(root, 'runs', 'A=1'))
        self.assertEqual(os.readlink(link), os.path.join('..', 'runs', 'A=1', 'tensorboard'))
        os.makedirs(os.path.join(root, 'runs', 'A=1', 'tensorboard', 'train'))
        self.assertEqual(os.listdir(link), ['train'])  # followed once the run writes
        tb.link_run(os.path.join(root, 'tensorboard'), 'A=1', os.path.join(root, 'runs', 'B'))
        self.assertEqual(os.readlink(link), os.path.join('..', 'runs', 'B', 'tensorboard'))
        os.makedirs(os.path.join(root, 'tensorboard', 'report'))
        tb.link_run(os.path.join(root, 'tensorboard'), 'report', os.path.join(root, 'runs', 'report'))
        self.assertFalse(os.path.islink(os.path.join(root, 'tensorboard', 'report')))
        self.assertEqual(sorted(os.listdir(os.path.join(root, 'tensorboard'))), ['A=1', 'report'])

    def test_images_round_trip_and_bad_png_is_skipped(self):
        root = self.create_tempdir().full_path
        pixels = np.random.default_rng(0).integers(0, 256, size=(5, 7, 4), dtype=np.uint8)
        good = os.path.join(root, 'panel.png')
        tf.io.write_file(good, tf.io.encode_png(pixels))
        bad = os.path.join(root, 'bad.png')
        with open(bad, 'w') as f:
            f.write('not a png')
        self.assertEqual(tb.write_images(os.path.join(root, 'report'), [('Panel', good), ('Bad', bad)], step=2), 1)
        (tag, step, plugin, value), = _values(os.path.join(root, 'report'))
        self.assertEqual((tag, step, plugin), ('panel', 2, 'images'))
        width, height, png = tf.make_ndarray(value.tensor)
        self.assertEqual((int(width), int(height)), (7, 5))
        np.testing.assert_array_equal(tf.io.decode_png(png, channels=4).numpy(), pixels)


class HistogramTest(tf.test.TestCase):

    def test_histograms_entry_goes_to_its_split_and_not_to_scalars(self):
        workdir = self.create_tempdir().full_path
        w = writers.TensorBoardWriter(workdir)
        values = np.arange(100, dtype=np.float32)
        w.write({'train/loss': 1.5, writers.HISTOGRAMS: {'train/weights/dense': values}}, step=3)
        w.close()
        events = _values(os.path.join(workdir, 'tensorboard', 'train'))
        by_tag = {t: (s, p, v) for t, s, p, v in events}
        self.assertEqual(sorted(by_tag), ['loss', 'weights/dense'])
        step, plugin, value = by_tag['weights/dense']
        self.assertEqual((step, plugin), (3, 'histograms'))
        buckets = tf.make_ndarray(value.tensor)  # [k, 3]: left edge, right edge, count
        self.assertEqual(buckets[:, 2].sum(), 100)
        self.assertEqual((buckets[0, 0], buckets[-1, 1]), (0.0, 99.0))
        self.assertEqual(writers.scalars({'a': 1, writers.HISTOGRAMS: {}}), {'a': 1})


# ---- acceptance: a real TensorBoard server over a 2-run sweep -------------------------------------

TINY = ['experiments.Experiment.dataset = "digits"', 'data.Digits.train_size = 60', 'data.Digits.test_size = 30',
        'train.Trainer.num_steps = 4', 'train.Trainer.eval_every = 2', 'train.Trainer.batch_size = 20',
        'train.Trainer.log_every = 2', 'train.Trainer.learning_rate = 0.05']
SERVER_SECONDS = 120  # the server's whole life, whatever happens


@gin.configurable(module='experiments', denylist=['workdir', 'seed', 'overwrite'])
class TensorBoardSweep(sweep_experiment.SweepExperiment):
    """A width sweep whose report figures go to TensorBoard."""

    name = 'tensorboard_sweep'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class _Server:
    """`tensorboard --logdir=...` on 127.0.0.1, stopped by PID (its process group)."""

    def __init__(self, logdir: str):
        self.port = _free_port()
        cmd = [sys.executable, '-m', 'tensorboard.main', f'--logdir={logdir}', '--host=127.0.0.1',
               f'--port={self.port}', '--reload_interval=1']
        self.proc = subprocess.Popen(['timeout', str(SERVER_SECONDS)] + cmd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)

    def get(self, path: str, body=None, raw: bool = False):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f'http://127.0.0.1:{self.port}{path}', data=data,
                                         headers={'Content-Type': 'application/json', 'X-XSRF-Protected': '1'})
        with urllib.request.urlopen(request, timeout=20) as response:
            content = response.read()
        return content if raw else json.loads(content)

    def wait_for(self, predicate, seconds: float = 90):
        deadline = time.time() + seconds
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f'tensorboard exited with {self.proc.returncode}')
            try:
                last = predicate()
                if last:
                    return last
            except (OSError, ValueError):
                pass
            time.sleep(1)
        raise AssertionError(f'tensorboard did not serve the sweep in {seconds} s (last answer {last!r})')

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.mark.slow
@pytest.mark.ci
class TensorBoardServerTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_sweep_reads_back_through_the_http_api(self):
        workdir = self.create_tempdir().full_path
        config.parse_gin([], TINY, finalize=False)
        summary = TensorBoardSweep(workdir=workdir, sweep={'models.mlp.width': [4, 16]}, in_process=True).run()
        self.assertTrue(summary['ok'])
        records = {name: json.load(open(os.path.join(workdir, 'runs', name, 'results.json')))
                   for name in ('width=4', 'width=16')}
        self.assertCountEqual(os.listdir(os.path.join(workdir, 'tensorboard')), ['width=4', 'width=16', 'report'])
        server = _Server(os.path.join(workdir, 'tensorboard'))
        try:
            expected_runs = {'width=4', 'width=4/train', 'width=4/test', 'width=16', 'width=16/train',
                             'width=16/test', 'report'}
            groups_request = {
                'experimentName': '', 'startIndex': 0, 'sliceSize': 100, 'colParams': [],
                'allowedStatuses': ['STATUS_UNKNOWN', 'STATUS_SUCCESS', 'STATUS_FAILURE', 'STATUS_RUNNING']}

            def loaded():  # every run, both sessions' final metrics and the report's images are served
                runs = server.get('/data/runs')
                groups = server.get('/data/plugin/hparams/session_groups', groups_request)['sessionGroups']
                return (set(runs) >= expected_runs and len(groups) == 2
                        and all(len(g['metricValues']) >= 4 for g in groups)
                        and 'report' in server.get('/data/plugin/images/tags') and runs)

            runs = server.wait_for(loaded)

            # Scalars: every evaluation of both runs, as results.json recorded them.
            for name, record in records.items():
                query = urllib.parse.urlencode({'run': f'{name}/test', 'tag': 'accuracy'})
                points = server.get(f'/data/plugin/scalars/scalars?{query}')
                expected = [(h['step'], h['test/accuracy']) for h in record['history'] if 'test/accuracy' in h]
                self.assertEqual([p[1] for p in points], [s for s, _ in expected])
                np.testing.assert_allclose([p[2] for p in points], [v for _, v in expected], rtol=1e-6)

            # HParams: one session per run with its axis value, trainer knobs and final metrics.
            groups = server.get('/data/plugin/hparams/session_groups', groups_request)
            sessions = {g['sessions'][0]['name']: g for g in groups['sessionGroups']}
            self.assertEqual(set(sessions), set(records))
            experiment = server.get('/data/plugin/hparams/experiment', {'experimentName': ''})
            hparam_names = {h['name'] for h in experiment['hparamInfos']}
            self.assertTrue({'models.mlp.width', 'learning_rate', 'batch_size', 'optimizer', 'dataset', 'model',
                             'loss', 'seed'} <= hparam_names, hparam_names)
            metric_names = {(m['name']['group'], m['name']['tag']) for m in experiment['metricInfos']}
            self.assertTrue({('test', 'accuracy'), ('train', 'accuracy'), ('train', 'loss')} <= metric_names)
            for name, record in records.items():
                group = sessions[name]
                self.assertEqual(group['hparams']['models.mlp.width'], int(name.split('=')[1]))
                self.assertEqual((group['hparams']['learning_rate'], group['hparams']['batch_size'],
                                  group['hparams']['dataset']), (0.05, 20, 'digits'))
                metrics = {(m['name']['group'], m['name']['tag']): m for m in group['metricValues']}
                for tag in ('test/accuracy', 'train/loss'):
                    metric = metrics[tuple(tag.split('/'))]
                    self.assertEqual(metric['trainingStep'], record['final_step'])
                    self.assertAlmostEqual(metric['value'], record['final'][tag], places=6)

            # One report figure as an image, pixel for pixel.
            tags = server.get('/data/plugin/images/tags')
            self.assertIn('test_accuracy', tags['report'])
            query = urllib.parse.urlencode({'run': 'report', 'tag': 'test_accuracy'})
            image, = server.get(f'/data/plugin/images/images?{query}')
            png = server.get(f'/data/plugin/images/individualImage?{image["query"]}', raw=True)
            served = tf.io.decode_png(png, channels=4).numpy()
            drawn = tf.io.decode_png(tf.io.read_file(os.path.join(workdir, 'figures', 'test_accuracy.png')),
                                     channels=4).numpy()
            np.testing.assert_array_equal(served, drawn)

            # The operative config as text.
            query = urllib.parse.urlencode({'run': 'width=16', 'tag': tb.CONFIG_TAG})
            text = html.unescape(server.get(f'/data/plugin/text/text?{query}')[-1]['text'])
            operative = open(os.path.join(workdir, 'runs', 'width=16', 'operative_config.gin')).read()
            self.assertIn('width = 16', operative)
            for line in ('width = 16', 'learning_rate = 0.05'):
                self.assertIn(line, text)
            print(json.dumps({'runs': sorted(runs), 'hparams': {n: sessions[n]['hparams'] for n in sessions},
                              'metrics': {n: {f"{m['name']['group']}/{m['name']['tag']}": m['value']
                                              for m in sessions[n]['metricValues']} for n in sessions},
                              'image': list(served.shape), 'config_chars': len(text)}, indent=1))
        finally:
            server.stop()


if __name__ == '__main__':
    tf.test.main()
