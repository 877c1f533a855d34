from setuptools import setup

setup(name="threshold_predictor", version="0.1", py_modules=["threshold_predictor"])
