"""Tests for extreme_mem/data/spheres.py (Stephenson et al. 2021, appendix A.5)."""

import numpy as np
import tensorflow as tf
from sklearn import linear_model

from extreme_mem import registry
from extreme_mem.data import spheres
from extreme_mem.data import transforms


class SpheresTest(tf.test.TestCase):

    def test_centres_are_orthogonal_opposed_pairs(self):
        c = spheres.pair_centers(6, 4, 2.0)
        self.assertAllClose(c[0] + c[1], np.zeros(4))
        self.assertAllClose(np.linalg.norm(c, axis=1), np.full(6, 2.0))
        gram = c[0::2] @ c[0::2].T  # one centre per pair: orthogonal axes
        self.assertAllClose(gram, 4.0 * np.eye(3))

    def test_points_lie_on_their_spheres(self):
        src = spheres.Spheres(num_classes=4, subspace_dim=5, ambient_dim=8, radius=3.0, center_norm=1.0,
                              train_per_class=20, test_per_class=7)
        z_train, y_train, z_test, y_test = src.latent()
        centers = spheres.pair_centers(4, 5, 1.0)
        for z, y in ((z_train, y_train), (z_test, y_test)):
            self.assertAllClose(np.linalg.norm(z - centers[y], axis=1), np.full(len(z), 3.0))
        self.assertAllEqual(np.bincount(y_train), [20] * 4)
        self.assertAllEqual(np.bincount(y_test), [7] * 4)

    def test_load_standardises_features_and_keeps_sizes(self):
        data = spheres.Spheres(ambient_dim=64, train_per_class=50, test_per_class=10).load(seed=3)
        self.assertEqual(data.info.name, 'spheres')
        self.assertEqual(data.info.num_classes, 10)
        self.assertEqual(data.info.input_shape, (64,))
        self.assertEqual(data.train.images.shape, (500, 64))
        self.assertEqual(data.test.images.shape, (100, 64))
        self.assertEqual(data.train.images.dtype, np.float32)
        self.assertAllClose(data.train.images.mean(axis=0), np.zeros(64), atol=1e-5)
        self.assertAllClose(data.train.images.std(axis=0), np.ones(64), atol=1e-4)
        # Rank: the features live in the 30-dim latent subspace (plus nothing else).
        self.assertEqual(np.linalg.matrix_rank(data.train.images - data.train.images.mean(0), tol=1e-3), 30)

    def test_geometry_does_not_depend_on_the_run_seed(self):
        a = spheres.Spheres(ambient_dim=40, train_per_class=10, test_per_class=5).load(seed=0)
        b = spheres.Spheres(ambient_dim=40, train_per_class=10, test_per_class=5).load(seed=7)
        self.assertAllEqual(a.train.images, b.train.images)
        c = spheres.Spheres(ambient_dim=40, train_per_class=10, test_per_class=5, data_seed=1).load(seed=0)
        self.assertNotAllClose(a.train.images, c.train.images)

    def test_small_radius_is_linearly_separable_large_radius_is_not(self):
        # Appendix A.5: separable if r < 1 (|centre| = 1); r = 5 is well into the inseparable regime.
        kwargs = dict(ambient_dim=48, train_per_class=200, test_per_class=100)
        small = spheres.Spheres(radius=0.5, **kwargs).load(seed=0)
        large = spheres.Spheres(radius=5.0, **kwargs).load(seed=0)
        clf = linear_model.LogisticRegression(max_iter=3000, C=100.0)
        clf.fit(small.train.images, small.train.labels)
        self.assertEqual(clf.score(small.train.images, small.train.labels), 1.0)
        acc = clf.fit(large.train.images, large.train.labels).score(large.test.images, large.test.labels)
        self.assertLess(acc, 0.6)
        self.assertGreater(acc, 0.15)  # but above chance (0.1): the pair axes carry some signal

    def test_permuted_labels_keep_provenance(self):
        data = spheres.Spheres(ambient_dim=32, train_per_class=40, test_per_class=4, label_noise=0.5,
                               noise_kind='permute').load(seed=2)
        mask = transforms.relabeled_mask(data.train)
        self.assertEqual(int(mask.sum()), 200)
        self.assertAllEqual(np.bincount(data.train.labels, minlength=10), [40] * 10)  # a permutation
        self.assertAllEqual(data.train.labels[~mask], data.train.true_labels[~mask])

    def test_bad_arguments_name_the_value(self):
        with self.assertRaisesRegex(ValueError, 'even'):
            spheres.Spheres(num_classes=7)
        with self.assertRaisesRegex(ValueError, 'subspace_dim must be >= num_classes / 2 = 5'):
            spheres.Spheres(subspace_dim=3)
        with self.assertRaisesRegex(ValueError, 'radius must be > 0, got -1'):
            spheres.Spheres(radius=-1.0)
        with self.assertRaisesRegex(ValueError, 'ambient_dim'):
            spheres.Spheres(subspace_dim=30, ambient_dim=10)

    def test_is_registered(self):
        self.assertIs(registry.DATASETS.get('spheres'), spheres.Spheres)


if __name__ == '__main__':
    tf.test.main()
