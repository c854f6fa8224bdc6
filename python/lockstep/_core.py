"""The compiled core (_lockstep) and lockstep's exceptions.

A C++ lockstep::Error arrives as Error (a RuntimeError) with the C++ one-line message; InvalidInput is also a
ValueError and IoError an OSError.
"""
from lockstep import _lockstep as C

Error = C.Error
InvalidInput = C.InvalidInput
IoError = C.IoError
