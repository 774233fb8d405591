"""Tests for extreme_mem/data/identity_images.py: sample-photo crops, one-image selection, patch rank."""

import gin
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import registry
from extreme_mem.data import digits
from extreme_mem.data import identity_images as ii


def slow_patches(x: np.ndarray, k: int) -> np.ndarray:
    """[H·W, k·k] SAME (zero-padded) patches of a 2-D image via tf.image.extract_patches (oracle)."""
    t = tf.constant(x[None, :, :, None], tf.float64)
    p = tf.image.extract_patches(t, sizes=[1, k, k, 1], strides=[1, 1, 1, 1], rates=[1, 1, 1, 1], padding='SAME')
    return p.numpy().reshape(-1, k * k)


class PatchRankTest(tf.test.TestCase, parameterized.TestCase):

    def test_single_corner_pixel_spans_nine_patch_positions(self):
        # A pixel at (0, 0) lies in the 5x5 patches centred at (i, j), i, j in {0, 1, 2}: 9
        # distinct positions within the patch, so the patches span 9 dimensions.
        x = np.zeros((10, 10))
        x[0, 0] = 1.0
        self.assertEqual(ii.patch_rank(x, 5)[:2], (9, 25))

    def test_zero_image_has_rank_zero(self):
        self.assertEqual(ii.patch_rank(np.zeros((6, 6)), 3)[0], 0)

    @parameterized.parameters(3, 5)
    def test_matches_matrix_rank_of_extracted_patches(self, k):
        rng = np.random.default_rng(k)
        for x in (rng.normal(size=(12, 12)), np.outer(np.arange(12.0), np.ones(12))):
            self.assertEqual(ii.patch_rank(x, k, rtol=1e-9)[0], np.linalg.matrix_rank(slow_patches(x, k), tol=None))

    def test_even_kernel_is_rejected(self):
        with self.assertRaisesRegex(ValueError, 'odd kernel'):
            ii.patch_rank(np.ones((5, 5)), 4)


class SamplePhotosTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        gin.clear_config()

    def test_crops_are_block_means_of_grey_photo(self):
        rng = np.random.default_rng(0)
        photo = rng.integers(0, 256, size=(200, 300, 3)).astype(np.uint8)
        crops = ii.photo_crops(photo)
        self.assertEqual(crops.shape, (ii.GRID_ROWS * ii.GRID_COLS, 28, 28))
        grey = 0.299 * photo[..., 0] + 0.587 * photo[..., 1] + 0.114 * photo[..., 2]
        # Last crop: bottom-right corner; pixel (3, 5) averages rows 12..15, columns 20..23.
        y0, x0 = 200 - ii.CROP, 300 - ii.CROP
        self.assertAllClose(crops[-1][3, 5], grey[y0 + 12:y0 + 16, x0 + 20:x0 + 24].mean())

    def test_splits_and_classes(self):
        data = ii.SamplePhotos(preprocess='none').load(seed=0)
        self.assertEqual(data.train.images.shape, (24, 28, 28, 1))
        self.assertEqual(data.test.images.shape, (24, 28, 28, 1))
        self.assertEqual(np.bincount(data.train.labels).tolist(), [12, 12])
        self.assertEqual(data.info.num_classes, 2)
        self.assertBetween(float(data.train.images.max()), 1.0, 255.0)
        self.assertIs(registry.DATASETS.get('sample_photos'), ii.SamplePhotos)

    def test_default_training_crop_has_full_patch_rank(self):
        # The offline default (gin/zhang2020/base.gin): class 0, index 10, standardised.
        data = ii.SamplePhotos(preprocess='standardize').load(seed=0)
        position = ii.select_example(data.train, 0, 10)
        self.assertEqual(ii.patch_rank(data.train.images[position], 5)[0], 25)


class IdentityImageTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        gin.clear_config()

    def test_selects_the_index_th_example_of_the_class_of_any_source(self):
        source = digits.Digits(preprocess='standardize').load(seed=0)
        expected = source.train.images[np.flatnonzero(source.train.labels == 7)[3]]
        gin.parse_config("data.Digits.preprocess = 'standardize'")
        data = ii.IdentityImage(source='digits', train_class=7, train_index=3, num_other=5, num_random=1,
                                patterns=('ring',)).load(seed=0)
        self.assertAllEqual(data.train.images[0], expected)
        self.assertAllEqual(data.train.labels, data.train.images)  # identity target
        self.assertEqual(data.train.true_labels.tolist(), [7])
        self.assertEqual(data.test.images.shape, (5 + 1 + 1, 8, 8, 1))
        self.assertAllEqual(data.test.labels, data.test.images)
        self.assertEqual(data.test.true_labels.tolist(), [0, 1, 2, 3, 4, -1, -1])
        # Generated images carry the training image's pixel statistics.
        self.assertAllClose(data.test.images[-1].std(), expected.std(), rtol=1e-4)
        self.assertAllClose(data.test.images[-1].mean(), expected.mean(), atol=1e-4)

    def test_npz_source_in_mnist_layout(self):
        rng = np.random.default_rng(0)
        path = self.create_tempfile('mnist.npz').full_path
        x_train = rng.integers(0, 256, size=(30, 28, 28)).astype(np.uint8)
        y_train = np.arange(30) % 10
        np.savez(path, x_train=x_train, y_train=y_train, x_test=x_train[:10], y_test=y_train[:10])
        gin.parse_config([f"data.Npz.path = '{path}'", "data.Npz.preprocess = 'standardize'"])
        data = ii.IdentityImage(source='npz', train_class=7, train_index=1, num_other=3).load(seed=0)
        raw = x_train[17].astype(np.float64)  # the second "7": positions 7, 17, 27
        expected = (raw - x_train.mean()) / x_train.std()
        self.assertAllClose(data.train.images[0, ..., 0], expected, rtol=1e-4, atol=1e-4)
        self.assertEqual(data.info.input_shape, (28, 28, 1))

    def test_index_out_of_range_names_the_class_size(self):
        with self.assertRaisesRegex(ValueError, r"train_index 12 out of range: class 1 has 12"):
            ii.IdentityImage(source='sample_photos', train_class=1, train_index=12).load(seed=0)

    def test_unknown_source_lists_known(self):
        with self.assertRaisesRegex(LookupError, 'sample_photos'):
            ii.IdentityImage(source='no_such_data')

    def test_patterns(self):
        p = ii.pattern_images((6, 6, 2), ('checkerboard', 'cross'))
        self.assertEqual(p.shape, (2, 6, 6, 2))
        self.assertEqual(p[0, 0, 0, 0], 0.0)
        with self.assertRaisesRegex(ValueError, 'valid'):
            ii.pattern_images((6, 6, 1), ('spiral',))


if __name__ == '__main__':
    tf.test.main()
