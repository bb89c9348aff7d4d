#!/bin/sh
# Lists the files changed on this branch. The skill may suggest running it;
# AML never executes package scripts while staging.
git diff --name-only "${1:-main}"...HEAD
