"""The LLM adapter, driven by a fake completion function: tau-bench's message loop and the mapping
of a model's reply to an action."""

import json

from iclr25.agents import RESPOND, ToolEnv, make_retail_db, make_tasks, run_episode
from iclr25.agents.llm import LLMAgent, LLMUser, llm_users, message_to_action


def test_message_to_action():
    tool_msg = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "function": {"name": "get_user_details", "arguments": json.dumps({"user_id": "u"})}},
        {"id": "b", "function": {"name": "think", "arguments": "{}"}}]}
    a = message_to_action(tool_msg)
    assert a.name == "get_user_details" and a.kwargs == {"user_id": "u"}
    r = message_to_action({"role": "assistant", "content": "hello"})
    assert r.name == RESPOND and r.kwargs == {"content": "hello"}


def test_llm_agent_and_user_loop_with_fake_models():
    db = make_retail_db(2, 10)
    tasks, _ = make_tasks(db, 3, seed=1)
    task = next(t for t in tasks if t.intent != "info") if any(t.intent != "info" for t in tasks) else tasks[0]
    seen_tools = []

    def agent_model(messages, tools):
        seen_tools.append(len(tools))
        n_tool = sum(m["role"] == "tool" for m in messages)
        if n_tool == 0:
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "function": {"name": "find_user_id_by_email",
                                          "arguments": json.dumps({"email": db["users"][task.user_id]["email"]})}}]}
        return {"role": "assistant", "content": "Anything else?"}

    user_turns = []

    def user_model(messages, tools):
        assert tools is None and messages[0]["role"] == "system" and task.instruction in messages[0]["content"]
        user_turns.append(messages[-1]["content"])
        return {"role": "assistant", "content": "Hi" if len(user_turns) == 1 else "No. ###STOP###"}

    env = ToolEnv(db, [task], user_factory=llm_users(user_model))
    agent = LLMAgent(agent_model, env.wiki, env.tools_info)
    ep = run_episode(env, agent, 0, seed=0)
    assert ep.end == "user_stop" and ep.reward == (1.0 if not task.actions and not task.outputs else 0.0)
    roles = [m["role"] for m in agent.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert agent.messages[3]["content"] == task.user_id
    assert seen_tools == [len(env.tools_info)] * 2
    assert isinstance(LLMUser(task, user_model), LLMUser)
