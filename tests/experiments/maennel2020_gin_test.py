"""gin/maennel2020 files define the runs their figures need (tests/gin_files_test.py parses every
file with every run's bindings)."""

import gin
from absl.testing import absltest

from extreme_mem import config
from extreme_mem.experiments import maennel2020_random_labels as maennel
from tests import testing


class GinTest(testing.GinCleanMixin, absltest.TestCase):

    def test_quick_has_the_acceptance_runs(self):
        config.parse_gin(['gin/maennel2020/quick.gin'], finalize=False)
        specs = maennel.RandomLabelTransfer(workdir=self.create_tempdir().full_path).specs()
        arms = {s.values.get('arm') for s in specs if s.values['role'] == 'downstream'}
        self.assertEqual(arms, set(maennel.transfer.ARMS))
        self.assertGreaterEqual(len({s.seed for s in specs if s.values['role'] == 'downstream'}), 3)
        self.assertEqual({s.values['sampled_layers'] for s in specs if s.values['role'] == 'table1'}, {0, 1, 2, 3})
        self.assertEqual({s.values['width'] for s in specs if s.values['role'] == 'fsigma'}, {256, 2048})
        self.assertEqual(gin.query_parameter('models.simple_cnn.num_filters'), 256)

    def test_upstream_epochs_keep_the_paper_ratio(self):
        config.parse_gin(['gin/maennel2020/fig1_vgg16_cifar10.gin'], finalize=False)
        specs = maennel.RandomLabelTransfer(workdir=self.create_tempdir().full_path).specs()
        up = {s.values['variant']: s for s in specs if s.values['role'] == 'upstream' and s.seed == 0}
        # Experiment 1: 120 epochs of 20,000 examples at batch 256 = 9,375 steps.
        self.assertIn('train.Trainer.num_steps = 9375', up['exp1'].bindings)
        self.assertIn('train.Trainer.num_steps = 6250', up['exp3'].bindings)  # 80 epochs
        self.assertEmpty([b for b in up['exp1'].bindings if b.startswith('upstream_epochs')])


if __name__ == '__main__':
    absltest.main()
