"""Tiny TensorFlow SavedModels built at test time, both ways a user brings them.

- tf2_model: tf.saved_model.save of a tf.Module with three signatures (two named inputs and two
  outputs; one float input; string input with `_bytes` outputs).
- keras_model: a Keras 3 model exported with `model.export` (a TF2 SavedModel).
- keras_image_model: a Keras 3 image model ([side, side, 3] -> the sum of its top-left block),
  exported with `model.export`, for the image explanation methods (XRAI).
- tf1_model: the v1 SavedModelBuilder (what Estimator exports were made of) with a variable, a
  predict `serving_default`, and classify/regress signatures over serialized tf.Example.
Importing this module imports TensorFlow: only TensorFlow tests use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf


class _Module(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None], tf.float32)])
    def multi(self, a: Any, b: Any) -> dict[str, Any]:
        return {"total": tf.reduce_sum(a, axis=1) + b, "scaled": a * tf.expand_dims(b, 1)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def half(self, x: Any) -> dict[str, Any]:
        return {"y": 0.5 * x + 3.0}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def text(self, text_bytes: Any) -> dict[str, Any]:
        return {"length": tf.strings.length(text_bytes), "echo_bytes": text_bytes,
                "upper": tf.strings.upper(text_bytes)}



    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def uneven(self, x: Any) -> dict[str, Any]:
        return {"all": x, "first": x[:1]}


def tf2_model(directory: Path) -> Path:
    """Signatures: serving_default (a [-1,2], b [-1] -> total, scaled), half (x -> 0.5x+3),
    text (text_bytes -> length, echo_bytes, upper), uneven (x -> all = x, first = x[:1])."""
    module = _Module()
    tf.saved_model.save(module, str(directory), signatures={
        "serving_default": module.multi, "half": module.half, "text": module.text,
        "uneven": module.uneven})
    return directory


def keras_image_model(directory: Path, side: int = 12) -> Path:
    """Input `image` [None, side, side, 3] -> `output_0` [None, 1]: the sum of the image's
    top-left (side/2 x side/2) block (a crop, then a Dense layer of ones), exported for serving.
    Linear, so integrated gradients from a black baseline are the block's own pixel values."""
    import keras

    half = side // 2
    model = keras.Sequential([keras.Input((side, side, 3), name="image"),
                              keras.layers.Cropping2D(((0, side - half), (0, side - half))),
                              keras.layers.Flatten(), keras.layers.Dense(1)])
    model.layers[-1].set_weights([np.ones((half * half * 3, 1), np.float32),
                                  np.zeros(1, np.float32)])
    model.export(str(directory), verbose=False)
    return directory


def keras_model(directory: Path) -> tuple[Path, Any]:
    """A Dense(2) Keras model over 3 features, exported for serving; returns (dir, model)."""
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.layers[0].set_weights([np.arange(6, dtype=np.float32).reshape(3, 2) / 10,
                                 np.array([0.5, -0.5], np.float32)])
    model.export(str(directory), verbose=False)
    return directory, model


def tf1_model(directory: Path) -> Path:
    """v1 builder export. serving_default: x [-1] -> y = w*x (w = 2.0, a restored variable);
    classify_x: tf.Example{x, bias=0} -> classes [neg, pos], scores softmax([-z, z]), z = w*x+bias;
    tensorflow/serving/regress: tf.Example{x, bias=0} -> z."""
    graph = tf.Graph()
    with graph.as_default():
        v1 = tf.compat.v1
        weight = v1.get_variable("w", initializer=2.0)
        x = v1.placeholder(tf.float32, [None], name="x")
        serialized = v1.placeholder(tf.string, [None], name="tf_example")
        features = tf.io.parse_example(serialized, {
            "x": tf.io.FixedLenFeature([1], tf.float32),
            "bias": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
        })
        z = weight * features["x"] + features["bias"]
        scores = tf.nn.softmax(tf.concat([-z, z], axis=1))
        classes = tf.tile(tf.constant([["neg", "pos"]]), [tf.shape(z)[0], 1])
        builder = v1.saved_model.Builder(str(directory))
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={
                "serving_default": v1.saved_model.predict_signature_def({"x": x}, {"y": weight * x}),
                "classify_x": v1.saved_model.classification_signature_def(serialized, classes, scores),
                "tensorflow/serving/regress": v1.saved_model.regression_signature_def(serialized, z),
            })
        builder.save()
    return directory


def tf2_one_signature(directory: Path, name: str = "only") -> Path:
    """A TF2 export whose one signature is not called serving_default (x -> 0.5x+3)."""
    module = _Module()
    tf.saved_model.save(module, str(directory), signatures={name: module.half})
    return directory


def tf1_without_serve_tag(directory: Path) -> Path:
    """A v1 export tagged `train` only: not servable."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        builder = tf.compat.v1.saved_model.Builder(str(directory))
        with tf.compat.v1.Session(graph=graph) as session:
            builder.add_meta_graph_and_variables(session, ["train"], signature_def_map={
                "serving_default": tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"y": x})})
        builder.save()
    return directory


# -- TF1-era exports declared like TensorFlow Serving's testdata --------------------------------

def half_plus_two(directory: Path, b: float = 2.0) -> Path:
    """Like tensorflow_serving/servables/tensorflow/testdata/saved_model_half_plus_two.py: x is
    feature "x" of serialized tf.Example (static shape [?, 1]), y = 0.5 * x + b; signatures
    serving_default (predict x -> y), regress_x_to_y and classify_x_to_y (tf.Example -> y)."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        a, bias = v1.Variable(0.5, name="a"), v1.Variable(b, name="b")
        serialized = v1.placeholder(tf.string, name="tf_example", shape=[None])
        parsed = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})
        x = tf.identity(parsed["x"], name="x")
        y = tf.identity(a * x + bias, name="y")
        info = v1.saved_model.utils.build_tensor_info
        build = v1.saved_model.signature_def_utils.build_signature_def
        builder = v1.saved_model.Builder(str(directory))
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={
                "serving_default": build({"x": info(x)}, {"y": info(y)}, "tensorflow/serving/predict"),
                "regress_x_to_y": build({"inputs": info(serialized)}, {"outputs": info(y)},
                                        "tensorflow/serving/regress"),
                "classify_x_to_y": build({"inputs": info(serialized)}, {"scores": info(y)},
                                         "tensorflow/serving/classify"),
            })
        builder.save()
    return directory


#: dtypes of the `echo_<name>` signatures of types_model (y = x, any shape).
ECHO_DTYPES = ("float", "double", "int8", "uint8", "int16", "int32", "int64", "uint32", "uint64",
               "bool", "string", "half", "uint16")


def types_model(directory: Path) -> Path:
    """A v1 builder export with one `echo_<dtype>` signature per ECHO_DTYPES (x -> y, unknown shape),
    and `mixed`: a float [?, 2], n int64 [?], s string [?] -> total float [?], n2 int64 [?],
    s_bytes (= s) and size int32 [?] (several named inputs and outputs, string and int inputs)."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        info = v1.saved_model.utils.build_tensor_info
        build = v1.saved_model.signature_def_utils.build_signature_def
        signatures = {}
        for name in ECHO_DTYPES:
            x = v1.placeholder(tf.as_dtype(name), name=f"x_{name}")
            signatures[f"echo_{name}"] = build({"x": info(x)}, {"y": info(tf.identity(x))},
                                               "tensorflow/serving/predict")
        a = v1.placeholder(tf.float32, [None, 2], name="a")
        n = v1.placeholder(tf.int64, [None], name="n")
        s = v1.placeholder(tf.string, [None], name="s")
        signatures["mixed"] = build(
            {"a": info(a), "n": info(n), "s": info(s)},
            {"total": info(tf.reduce_sum(a, axis=1) + tf.cast(n, tf.float32)), "n2": info(n * 2),
             "s_bytes": info(tf.identity(s)), "size": info(tf.strings.length(s))},
            "tensorflow/serving/predict")
        builder = v1.saved_model.Builder(str(directory))
        with v1.Session(graph=graph) as session:
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map=signatures)
        builder.save()
    return directory


def tf1_static(directory: Path, dtype: str = "float32", width: int = 3) -> Path:
    """A v1 builder export with a static-width input, as Estimator-era models were: x [?, width]
    of `dtype`; serving_default gives, per instance, a float score (a sigmoid of a fixed linear
    map) and `twice` (2x, in x's dtype)."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.as_dtype(dtype), [None, width], name="x")
        weights = tf.constant(np.linspace(-1.0, 1.0, width, dtype=np.float32).reshape(width, 1))
        score = tf.sigmoid(tf.matmul(tf.cast(x, tf.float32), weights))[:, 0]
        builder = v1.saved_model.Builder(str(directory))
        with v1.Session(graph=graph) as session:
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={
                "serving_default": v1.saved_model.predict_signature_def(
                    {"x": x}, {"score": score, "twice": x * tf.constant(2, tf.as_dtype(dtype))})})
        builder.save()
    return directory
