"""Regenerate tests/golden/<site>/<example>.sh from the current renderer."""

from tests.golden import cases, golden_path, render_case

for example, site in cases():
    path = golden_path(example, site)
    text = render_case(example, site)
    if text is None:
        path.unlink(missing_ok=True)
        continue
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
