"""Text safety, the floor every layer may stand on (the logger too): the secret detector and
redaction (:mod:`hermes.safety.secrets`) and the checks a field passes before it is stored or
shown (:mod:`hermes.safety.guard`: secrets, injected instructions, control characters).
Imports nothing of Hermes above :mod:`hermes.errors`."""
