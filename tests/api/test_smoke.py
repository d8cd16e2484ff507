from tests.api.conftest import problem_of


def test_a_token_lists_schedules(api, op_token, make_schedule):
    make_schedule("orders")
    r = api.get("/schedules", token=op_token)
    assert r.status_code == 200, r.content
    assert [s["name"] for s in r.json()] == ["orders"]


def test_no_token_is_401(api, db):
    body = problem_of(api.get("/schedules"), 401)
    assert "Bearer" in body["detail"]
