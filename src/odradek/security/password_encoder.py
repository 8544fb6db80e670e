"""Kafka's ``EncryptingPasswordEncoder``: how dynamic password configs are stored in ZooKeeper.

A password key set at run time (``listener.name.<l>.ssl.key.password``, ``...sasl.jaas.config``)
is written to ``/config/brokers/<id>`` encrypted with ``password.encoder.secret``. The stored
text is Kafka's comma-separated ``key:value`` map (any order)::

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,
    salt:<base64 of 256 random bytes>,iterations:4096,encryptedPassword:<base64>,
    passwordLength:<characters>,initializationVector:<base64 of 16 bytes>

The AES key is PBKDF2 (HMAC-SHA512, or SHA1 when stored so) of the secret over the salt,
``keyLength`` bits; the cipher is AES in CBC mode with PKCS#5 padding. Decoding uses the stored
parameters, so values written by Kafka with its defaults decode here and the other way round.
Only ``AES/CBC/PKCS5Padding`` is supported (Kafka's default; ``AES/GCM/...`` is refused).
Pure functions and an immutable object: any thread.
"""

from __future__ import annotations

import base64
import hashlib
import os

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from odradek.errors import InvalidConfigError

__all__ = ["PasswordEncoder"]

KEY_FACTORY_ALGORITHM = "keyFactoryAlgorithm"
CIPHER_ALGORITHM = "cipherAlgorithm"
INITIALIZATION_VECTOR = "initializationVector"
KEY_LENGTH = "keyLength"
SALT = "salt"
ITERATIONS = "iterations"
ENCRYPTED_PASSWORD = "encryptedPassword"
PASSWORD_LENGTH = "passwordLength"

DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"
DEFAULT_CIPHER = "AES/CBC/PKCS5Padding"
_DIGESTS = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA1": "sha1", "PBKDF2WithHmacSHA256": "sha256"}
SALT_BYTES = 256


def _parse_csv_map(text: str) -> dict[str, str]:
    """Kafka's ``Csv.parseCsvMap``: ``k1:v1,k2:v2`` (a value may hold ``:``, never ``,``)."""
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition(":")
        if not sep:
            raise InvalidConfigError("Password could not be decoded: not an encoded password")
        out[key.strip()] = value.strip()
    return out


class PasswordEncoder:
    """Encrypts and decrypts passwords with ``secret`` (Kafka's defaults as keyword arguments)."""

    def __init__(
        self,
        secret: str,
        key_factory_algorithm: str | None = None,
        cipher_algorithm: str = DEFAULT_CIPHER,
        key_length: int = 128,
        iterations: int = 4096,
    ) -> None:
        if cipher_algorithm != DEFAULT_CIPHER:
            raise InvalidConfigError(
                f"Invalid value {cipher_algorithm} for configuration password.encoder.cipher.algorithm"
            )
        self._secret = secret.encode("utf-8")
        self.key_factory_algorithm = key_factory_algorithm or DEFAULT_KEY_FACTORY
        if self.key_factory_algorithm not in _DIGESTS:
            raise InvalidConfigError(
                f"Invalid value {self.key_factory_algorithm} for configuration password.encoder.keyfactory.algorithm"
            )
        self.cipher_algorithm = cipher_algorithm
        self.key_length = key_length
        self.iterations = iterations

    def _key(self, factory: str, salt: bytes, iterations: int, key_length: int) -> bytes:
        digest = _DIGESTS.get(factory)
        if digest is None:
            raise InvalidConfigError(f"Password could not be decoded: unknown key factory {factory}")
        return hashlib.pbkdf2_hmac(digest, self._secret, salt, iterations, dklen=key_length // 8)

    def encode(self, password: str) -> str:
        """``password`` encrypted with a fresh salt and IV, as the ``key:value`` map above."""
        salt, iv = os.urandom(SALT_BYTES), os.urandom(16)
        key = self._key(self.key_factory_algorithm, salt, self.iterations, self.key_length)
        padder = padding.PKCS7(128).padder()
        plain = padder.update(password.encode("utf-8")) + padder.finalize()
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        encrypted = encryptor.update(plain) + encryptor.finalize()
        fields = {
            KEY_FACTORY_ALGORITHM: self.key_factory_algorithm,
            CIPHER_ALGORITHM: self.cipher_algorithm,
            KEY_LENGTH: str(self.key_length),
            SALT: base64.b64encode(salt).decode(),
            ITERATIONS: str(self.iterations),
            ENCRYPTED_PASSWORD: base64.b64encode(encrypted).decode(),
            PASSWORD_LENGTH: str(len(password)),
            INITIALIZATION_VECTOR: base64.b64encode(iv).decode(),
        }
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        """The password; InvalidConfigError("Password could not be decoded") for a wrong secret
        or a damaged value (the length check catches most wrong secrets that unpad)."""
        params = _parse_csv_map(encoded)
        try:
            if params.get(CIPHER_ALGORITHM) != DEFAULT_CIPHER:
                raise ValueError(f"unsupported cipher {params.get(CIPHER_ALGORITHM)}")
            key = self._key(
                params[KEY_FACTORY_ALGORITHM],
                base64.b64decode(params[SALT]),
                int(params[ITERATIONS]),
                int(params[KEY_LENGTH]),
            )
            iv = base64.b64decode(params[INITIALIZATION_VECTOR])
            decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
            padded = decryptor.update(base64.b64decode(params[ENCRYPTED_PASSWORD])) + decryptor.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            password = (unpadder.update(padded) + unpadder.finalize()).decode("utf-8")
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            raise InvalidConfigError(f"Password could not be decoded: {exc}") from None
        if len(password) != int(params[PASSWORD_LENGTH]):
            raise InvalidConfigError("Password could not be decoded, sanity check of length failed")
        return password
