"""The algorithm toolkit's error kinds (sagemaker_algorithm_toolkit.exceptions): a `UserError` is the
request's or the data's fault, an `AlgorithmError` the algorithm's. Messages are one line."""
from __future__ import annotations


class AlgorithmFailure(Exception):
    """Base: `kind` names it in the failure file (`UserError: Missing required hyperparameter: num_round`);
    `field` says where in a CreateTrainingJob request the culprit is (`HyperParameters.num_round`,
    `InputDataConfig.train.ContentType`), None when it is in the data."""

    kind = "AlgorithmError"

    def __init__(self, message: str, field: str | None = None) -> None:
        self.message = " ".join(str(message).split())
        self.field = field
        super().__init__(self.message)

    def one_line(self) -> str:
        return f"{self.kind}: {self.message}"


class UserError(AlgorithmFailure):
    kind = "UserError"


class AlgorithmError(AlgorithmFailure):
    kind = "AlgorithmError"
