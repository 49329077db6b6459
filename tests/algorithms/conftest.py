"""The SageMaker SDK side virtualenv's fixture (tests/serve) for the image URI tests."""
from tests.serve.conftest import sagemaker_python  # noqa: F401 - a fixture, used by name
