"""The Python API: :func:`train` with progress, and estimators in
scikit-learn's conventions (:class:`TextClassifier`, :class:`TextRegressor`)."""
