"""What more than one test module uses, so that no test module imports another."""
