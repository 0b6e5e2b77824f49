"""The engine's operators, one family a module; ``Stream`` methods call them."""
