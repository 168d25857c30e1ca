import pytest


@pytest.fixture(scope="package", autouse=True)
def _end_the_serving_process():
    """After the last test of tests/export/, the shared serving process is ended."""
    yield
    from tests.export import serving_process

    serving_process.stop()
