"""Every public name of the package says what it does: help() and an
editor's hover show a docstring for each class, function, method and
property that backplane and backplane.safetensors export."""
import inspect
import unittest

import backplane

# Dunder methods the language defines; their meaning is the protocol's.
PROTOCOL = {"__init__", "__next__", "__iter__", "__enter__", "__exit__", "__len__", "__bool__", "__getitem__",
            "__contains__", "__repr__", "__str__", "__eq__", "__hash__", "__dlpack__", "__dlpack_device__",
            "__del__", "__new__", "__post_init__", "__init_subclass__"}


def undocumented(prefix, namespace, names):
    missing = []
    for name in names:
        value = getattr(namespace, name)
        if inspect.ismodule(value) or not (inspect.isclass(value) or callable(value)):
            continue  # constants and type aliases
        if not inspect.getdoc(value):
            missing.append(f"{prefix}{name}")
        if not inspect.isclass(value) or value.__module__.split(".")[0] != "backplane":
            continue
        for member, attribute in vars(value).items():
            if (member.startswith("_") and member not in PROTOCOL) or member in PROTOCOL:
                continue
            function = attribute.fget if isinstance(attribute, property) else attribute
            function = getattr(function, "__func__", function)  # staticmethod, classmethod
            if callable(function) and not inspect.getdoc(function):
                missing.append(f"{prefix}{name}.{member}")
    return missing


class DocstringTest(unittest.TestCase):
    def test_every_public_name_has_a_docstring(self):
        missing = undocumented("backplane.", backplane, backplane.__all__)
        public = [name for name in dir(backplane.safetensors) if not name.startswith("_")
                  and getattr(getattr(backplane.safetensors, name), "__module__", "").startswith("backplane")]
        missing += undocumented("backplane.safetensors.", backplane.safetensors, public)
        self.assertEqual(sorted(set(missing)), [], "public names without a docstring")


if __name__ == "__main__":
    unittest.main()
