"""The pages' state without Qt: plain Python models that the pages show and unit tests drive."""
